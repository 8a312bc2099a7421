// Errors of the infrastructure layer. Use-case errors live in core/errors.ts.

/** Configuration that cannot be used; every problem is listed so one start shows them all. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}
