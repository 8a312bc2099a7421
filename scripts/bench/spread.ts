// The spread of a figure over rounds: on a shared two-core machine one round says little, so
// every ratio of the bench is printed as min/median/max of its rounds.

export interface Spread {
  min: number;
  median: number;
  max: number;
}

export function spread(values: number[]): Spread {
  if (values.length === 0) return { min: NaN, median: NaN, max: NaN };
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { min: sorted[0]!, median, max: sorted[sorted.length - 1]! };
}

/** `min/median/max` with `digits` decimals. */
export function showSpread(s: Spread, digits = 2): string {
  return `${s.min.toFixed(digits)}/${s.median.toFixed(digits)}/${s.max.toFixed(digits)}`;
}
