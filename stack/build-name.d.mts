// Types of build-name.mjs (plain Node, so that bootstrap can use it before `npm ci`).
export interface BuildSpec {
  version: string;
  patches?: string[];
  /** A Go module of ours the commands are built from. */
  main?: string;
}
export function cacheDir(env?: NodeJS.ProcessEnv): string;
export function mainFiles(dir: string): string[];
export function buildName(root: string, spec: BuildSpec): string;
export function binDir(root: string, name: string, spec: BuildSpec, env?: NodeJS.ProcessEnv): string;
