/**
 * `node --require dist/test/bench/heap-probe.js`: what a driver process holds, per thread, asked for from outside
 * (test/bench/memory.ts, floor.ts). With DURABLE_CSI_HEAP_PROBE_DIR set, the main thread serves HTTP on the unix
 * socket <dir>/<pid>.sock:
 * - GET /memory[?gc=1]: (after a full garbage collection of every thread, with gc=1, so that the heap figures are
 *   what is live) `process.memoryUsage()` (RSS, the main thread's heap, external, array buffers), the modules loaded,
 *   and each thread's V8 heap (the controller's workflow thread is a second isolate, which the main thread's figures
 *   leave out);
 * - POST /snapshot?label=x: a heap snapshot of every thread, <dir>/<pid>-<label>-t<threadId>.heapsnapshot (a snapshot
 *   collects garbage first, so it holds what is live).
 * Node runs preloads in worker threads too: each thread answers for itself over a BroadcastChannel, so the probe needs
 * no handle on the threads the SDK starts. Nothing here runs in a deployed process.
 */
import fs from 'node:fs';
import { Session } from 'node:inspector';
import http from 'node:http';
import path from 'node:path';
import v8 from 'node:v8';
import { BroadcastChannel, isMainThread, threadId } from 'node:worker_threads';

export const HEAP_PROBE_DIR_ENV = 'DURABLE_CSI_HEAP_PROBE_DIR';
const QUIET_MS = 300;

export interface ThreadHeap {
  threadId: number;
  /** V8 heap in use and committed, bytes. */
  heapUsed: number;
  heapTotal: number;
  /** Memory outside the heap held by this thread's JavaScript objects (buffers), bytes. */
  external: number;
}

export interface ProbeMemory {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  /** Modules in the main thread's require cache. */
  modules: number;
  /** Every thread's heap, the main thread's first. */
  threads: ThreadHeap[];
}

type Message = { id: number; kind: 'memory' | 'snapshot'; gc?: boolean; label?: string; dir?: string };
type Reply = { id: number; reply: ThreadHeap | string };

/** A full collection of this thread's heap; the thread's own inspector answers at once. */
function collectGarbage(): void {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.collectGarbage');
  session.disconnect();
}

function ownHeap(gc = false): ThreadHeap {
  if (gc) collectGarbage();
  const stats = v8.getHeapStatistics();
  return {
    threadId,
    heapUsed: stats.used_heap_size,
    heapTotal: stats.total_heap_size,
    external: stats.external_memory,
  };
}

function snapshotFile(dir: string, label: string): string {
  return path.join(dir, `${process.pid}-${label}-t${threadId}.heapsnapshot`);
}

const dir = process.env[HEAP_PROBE_DIR_ENV];
if (dir) {
  const channel = new BroadcastChannel(`durable-csi-heap-probe-${process.pid}`);
  channel.unref();
  if (!isMainThread) {
    channel.onmessage = (event) => {
      const message = (event as { data: Message }).data;
      if (!('kind' in message)) return;
      const reply =
        message.kind === 'memory'
          ? ownHeap(message.gc)
          : v8.writeHeapSnapshot(snapshotFile(message.dir ?? '', message.label ?? ''));
      channel.postMessage({ id: message.id, reply } satisfies Reply);
    };
  } else {
    let nextId = 0;
    const pending = new Map<number, (reply: ThreadHeap | string) => void>();
    channel.onmessage = (event) => {
      const { id, reply } = (event as { data: Reply }).data;
      if (reply !== undefined) pending.get(id)?.(reply);
    };
    /**
     * What the other threads answer: the count of threads is not known here, so the answers are taken until none
     * came for QUIET_MS after the first, or waitMs passed (a thread busy with a long task answers late, or not).
     */
    const askThreads = async (message: Omit<Message, 'id'>, waitMs: number): Promise<(ThreadHeap | string)[]> => {
      const id = ++nextId;
      const replies: (ThreadHeap | string)[] = [];
      await new Promise<void>((resolve) => {
        let quiet: NodeJS.Timeout | undefined;
        const deadline = setTimeout(resolve, waitMs);
        pending.set(id, (reply) => {
          replies.push(reply);
          clearTimeout(quiet);
          quiet = setTimeout(() => (clearTimeout(deadline), resolve()), QUIET_MS);
        });
        channel.postMessage({ ...message, id });
      });
      pending.delete(id);
      return replies;
    };
    const memory = async (gc: boolean): Promise<ProbeMemory> => {
      const others = (await askThreads({ kind: 'memory', gc }, gc ? 5_000 : 500)) as ThreadHeap[];
      const main = ownHeap(gc);
      const usage = process.memoryUsage();
      return {
        rss: usage.rss,
        heapUsed: usage.heapUsed,
        heapTotal: usage.heapTotal,
        external: usage.external,
        arrayBuffers: usage.arrayBuffers,
        modules: Object.keys(require.cache).length,
        threads: [main, ...others.sort((a, b) => a.threadId - b.threadId)],
      };
    };
    const snapshot = async (label: string): Promise<string[]> => {
      const own = v8.writeHeapSnapshot(snapshotFile(dir, label));
      // A workflow thread's snapshot takes seconds on a busy machine.
      const others = (await askThreads({ kind: 'snapshot', label, dir }, 30_000)) as string[];
      return [own, ...others];
    };
    const socket = path.join(dir, `${process.pid}.sock`);
    fs.rmSync(socket, { force: true });
    const server = http.createServer((request, response) => {
      const url = new URL(request.url ?? '/', 'http://probe');
      const answer =
        url.pathname === '/memory'
          ? memory(url.searchParams.get('gc') === '1')
          : url.pathname === '/snapshot'
            ? snapshot((url.searchParams.get('label') ?? 'snapshot').replace(/[^\w.-]/g, '_'))
            : Promise.reject(new Error(`no ${url.pathname}`));
      answer.then(
        (body) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body)),
        (error: unknown) => response.writeHead(500).end(String(error)),
      );
    });
    server.listen(socket);
    server.unref();
  }
}

/** Asks the probe of process `pid` (started with DURABLE_CSI_HEAP_PROBE_DIR=probeDir). */
export function askProbe<T>(probeDir: string, pid: number, what: string, method = 'GET'): Promise<T> {
  return new Promise((resolve, reject) => {
    const request = http.request({ socketPath: path.join(probeDir, `${pid}.sock`), path: what, method }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () =>
        response.statusCode === 200 ? resolve(JSON.parse(body) as T) : reject(new Error(`probe ${what}: ${body}`)),
      );
    });
    request.on('error', reject);
    request.end();
  });
}

/** The probe's memory figures of process `pid`. */
export const probeMemory = (probeDir: string, pid: number, gc = false) =>
  askProbe<ProbeMemory>(probeDir, pid, gc ? '/memory?gc=1' : '/memory');

/** Heap snapshots of every thread of process `pid`; the files written. */
export const probeSnapshot = (probeDir: string, pid: number, label: string) =>
  askProbe<string[]>(probeDir, pid, `/snapshot?label=${encodeURIComponent(label)}`, 'POST');

/** The NODE_OPTIONS that load the probe into the processes started with this environment. */
export function withHeapProbe(env: NodeJS.ProcessEnv, probeDir: string): NodeJS.ProcessEnv {
  return {
    ...env,
    [HEAP_PROBE_DIR_ENV]: probeDir,
    NODE_OPTIONS: `${env.NODE_OPTIONS ?? ''} --require ${path.join(__dirname, 'heap-probe.js')}`.trim(),
  };
}
