import https from 'node:https';

/**
 * A small Kubernetes REST client for the test process. @kubernetes/client-node is ESM-only and jest (on Node
 * below 24.9) cannot load it; the driver itself uses client-node (kubernetes/), this only drives the test.
 */
export class KubeRest {
  private readonly agent = new https.Agent({ keepAlive: true, rejectUnauthorized: false });

  constructor(
    readonly server: string,
    private readonly token: string,
    /** A unix socket that reaches the server (the real node's API server lives in its network namespace). */
    private readonly socketPath?: string,
  ) {}

  get<T>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  create<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>('POST', path, body);
  }

  /** A JSON merge patch. */
  patch<T>(path: string, body: unknown): Promise<T> {
    return this.request<T>('PATCH', path, body, 'application/merge-patch+json');
  }

  delete(path: string): Promise<unknown> {
    return this.request('DELETE', path);
  }

  async request<T>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> {
    try {
      return await this.send<T>(method, path, body, contentType);
    } catch (error) {
      // A kept-alive connection the server closed as idle just as this request went out on it: the request never
      // reached the server (Node's documentation, http.ClientRequest reusedSocket), so sending it again is safe.
      if (!(error instanceof StaleConnection)) throw error;
      return this.send<T>(method, path, body, contentType);
    }
  }

  private send<T>(method: string, path: string, body: unknown, contentType: string): Promise<T> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise<T>((resolve, reject) => {
      const request = https.request(
        `${this.server}${path}`,
        {
          method,
          agent: this.agent,
          socketPath: this.socketPath,
          headers: {
            Authorization: `Bearer ${this.token}`,
            Accept: 'application/json',
            // The length too: Node frames no body of a DELETE by itself (no chunked encoding for it), so the
            // server would read a DELETE's options as the start of the next request on the connection.
            ...(payload ? { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(payload) } : {}),
          },
          timeout: 30_000,
        },
        (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (text += chunk));
          response.on('end', () => {
            const status = response.statusCode ?? 0;
            if (status >= 200 && status < 300) resolve(parseBody(text) as T);
            else reject(new KubeError(status, `${method} ${path}: ${status} ${text.slice(0, 500)}`));
          });
        },
      );
      request.on('error', (error: NodeJS.ErrnoException) =>
        reject(request.reusedSocket && error.code === 'ECONNRESET' ? new StaleConnection(error.message) : error),
      );
      request.on('timeout', () => request.destroy(new Error(`${method} ${path}: timeout`)));
      request.end(payload);
    });
  }

  /**
   * Watches a collection: lists it (each item reported as ADDED), then streams changes from that version on,
   * reconnecting from the last version seen until stopped.
   */
  watch<T extends { metadata?: { resourceVersion?: string } }>(
    path: string,
    onEvent: (type: string, object: T) => void,
  ): { ready: Promise<void>; stop(): void } {
    let stopped = false;
    let current: ReturnType<typeof https.get> | undefined;
    const separator = path.includes('?') ? '&' : '?';
    const stream = (version: string) => {
      if (stopped) return;
      current = https.get(
        `${this.server}${path}${separator}watch=1&allowWatchBookmarks=true&resourceVersion=${version}`,
        { agent: this.agent, socketPath: this.socketPath, headers: { Authorization: `Bearer ${this.token}` } },
        (response) => {
          let buffer = '';
          let last = version;
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => {
            buffer += chunk;
            let newline: number;
            while ((newline = buffer.indexOf('\n')) >= 0) {
              const line = buffer.slice(0, newline);
              buffer = buffer.slice(newline + 1);
              if (!line.trim()) continue;
              const event = JSON.parse(line) as { type: string; object: T };
              last = event.object.metadata?.resourceVersion ?? last;
              if (event.type === 'ERROR') return restart();
              if (event.type !== 'BOOKMARK') onEvent(event.type, event.object);
            }
          });
          response.on('end', () => setTimeout(() => stream(last), 100));
        },
      );
      current.on('error', () => setTimeout(() => restart(), 500));
    };
    const restart = () => {
      current?.destroy();
      if (!stopped) void list().catch(() => setTimeout(restart, 500));
    };
    const list = async () => {
      const collection = await this.get<{ items: T[]; metadata: { resourceVersion: string } }>(path);
      for (const item of collection.items) onEvent('ADDED', item);
      stream(collection.metadata.resourceVersion);
    };
    return {
      ready: list(),
      stop: () => {
        stopped = true;
        current?.destroy();
      },
    };
  }

  close(): void {
    this.agent.destroy();
  }
}

export class KubeError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** JSON when it is JSON (the API), else the text itself (/readyz answers "ok"). */
function parseBody(text: string): unknown {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return text;
  }
}

/** A request reset on a kept-alive socket it reused, before any answer: KubeRest.request sends it once more. */
class StaleConnection extends Error {}
