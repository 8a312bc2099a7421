// Errors of the infrastructure layer. Use-case errors live in core/errors.ts.

/** Configuration that cannot be used; every problem is listed so one start shows them all. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

/** Temporal is reachable but not set up for the service (its namespace or a search attribute
 * missing, or of another type), or its setup could not complete. The message says what to do;
 * like ConfigError, it is shown without a stack. */
export class TemporalSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemporalSetupError';
  }
}
