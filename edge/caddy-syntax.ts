// Caddyfile syntax the edge's configuration is written with (caddyfile.ts, edge-errors.ts).

/** A directive with a block: `head {`, its lines indented, `}`. */
export const block = (head: string, lines: string[], indent = ''): string[] => [
  `${indent}${head} {`,
  ...lines.map((l) => `${indent}\t${l}`),
  `${indent}}`,
];

/** The surfaces whose bytes the edge reads from Kubo, each with its own error shape. */
export type Surface = 'gateway' | 's3';
