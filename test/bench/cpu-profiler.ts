/**
 * `node --require dist/test/bench/cpu-profiler.js`: CPU profiles of every thread of a process (the main thread and
 * its worker threads alike: Node runs preloads in workers too), over the stretches the benchmark chooses. SIGUSR2
 * to the process starts profiling every thread; the next SIGUSR2 stops it and writes each thread's profile as
 * <command>-<pid>-<thread>-<n>.cpuprofile into DURABLE_CSI_PROFILE_DIR (a profile still running is written at
 * exit). Node 20 refuses `--cpu-prof` in NODE_OPTIONS, which is how the benchmark reaches the processes the test
 * cluster spawns (bench.ts `--profile`), and --cpu-prof could not leave out the start-up anyway.
 */
import fs from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';
import { BroadcastChannel, isMainThread, threadId } from 'node:worker_threads';

const dir = process.env.DURABLE_CSI_PROFILE_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  let running = false;
  let written = 0;
  const start = () => {
    if (running) return;
    running = true;
    session.post('Profiler.start');
  };
  const stop = () => {
    if (!running) return;
    running = false;
    // A session on the thread's own inspector answers synchronously: this works in an exit handler too.
    session.post('Profiler.stop', (error, result) => {
      if (error) return;
      const name = `${process.argv[2] ?? 'node'}-${process.pid}-${threadId}-${written++}.cpuprofile`;
      fs.writeFileSync(path.join(dir, name), JSON.stringify(result.profile));
    });
  };
  const channel = new BroadcastChannel(`durable-csi-profiler-${process.pid}`);
  channel.unref();
  channel.onmessage = (message) => ((message as { data: unknown }).data === 'start' ? start() : stop());
  if (isMainThread) {
    let on = false;
    process.on('SIGUSR2', () => {
      on = !on;
      if (on) start();
      else stop();
      channel.postMessage(on ? 'start' : 'stop');
    });
  }
  process.on('exit', stop);
}
