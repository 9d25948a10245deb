import { parseBenchArgs, type BenchOptions } from './options';

/** Runs a bench file's main with the parsed command line; exits 0 on success, 1 with the stack otherwise. */
export function benchMain(run: (options: BenchOptions) => Promise<void>): void {
  let options: BenchOptions;
  try {
    options = parseBenchArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  run(options).then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`${(err as Error).stack}\n`);
      process.exit(1);
    },
  );
}

export const say = (line: string) => process.stdout.write(`${line}\n`);
