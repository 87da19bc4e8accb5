/** Entry run by scripts/setup.js: make sure a Temporal CLI is available, installing it if needed. */
import { locateTemporalCli, temporalCliVersion } from './locate-cli';

async function main(): Promise<void> {
  const cli = await locateTemporalCli({ install: true });
  console.log(`Temporal CLI: ${cli}`);
  console.log(await temporalCliVersion(cli));
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
});
