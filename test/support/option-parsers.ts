import { InvalidArgumentError } from 'commander';

/** A commander argument parser for whole numbers of at least `min`, shared by the soak and the benchmark. */
export function integer(min: number) {
  return (text: string): number => {
    const value = Number(text);
    if (!Number.isSafeInteger(value) || value < min)
      throw new InvalidArgumentError(`"${text}" is not an integer >= ${min}`);
    return value;
  };
}
