import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';

/** One gRPC call seen by the proxy: its method, its first request message (decompressed) and whether it is open. */
export interface ProxiedCall {
  method: string;
  request?: Buffer;
  open: boolean;
}

/**
 * A plaintext HTTP/2 proxy in front of a gRPC server that records every call passing through it: what a client
 * really sends (how many long polls it holds, say), seen on the wire rather than taken from its options.
 */
export class GrpcCallProxy {
  readonly calls: ProxiedCall[] = [];
  private readonly upstream: http2.ClientHttp2Session;
  private readonly server = http2.createServer();
  private readonly holds: Hold[] = [];
  private readonly refusals: Refusal[] = [];
  private refused = 0;

  private constructor(upstreamAddress: string) {
    this.upstream = http2.connect(`http://${upstreamAddress}`);
    this.upstream.on('error', () => undefined); // surfaces as failed calls for the client behind the proxy
    this.server.on('stream', (stream, headers) => this.forward(stream, headers));
  }

  static async start(upstreamAddress: string): Promise<GrpcCallProxy> {
    const proxy = new GrpcCallProxy(upstreamAddress);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get address(): string {
    return `127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Calls open now whose method ends with `method` and whose request contains `text`. */
  openCalls(method: string, text: string): ProxiedCall[] {
    return this.calls.filter((call) => call.open && call.method.endsWith(`/${method}`) && call.request?.includes(text));
  }

  async close(): Promise<void> {
    this.upstream.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /**
   * Holds every call whose method ends with `method` and whose first request message contains `text` until the
   * returned release is called: the client sees a slow server (a call in flight for as long as the test wants).
   */
  hold(method: string, text: string): () => void {
    const hold: Hold = {
      matches: (call) => call.method.endsWith(`/${method}`) && !!call.request?.includes(text),
      queue: [],
    };
    this.holds.push(hold);
    return () => {
      this.holds.splice(this.holds.indexOf(hold), 1);
      for (const forward of hold.queue.splice(0)) forward();
    };
  }

  /**
   * Answers every call whose method ends with `method` and whose first request message contains `text` with gRPC
   * status `code` (FAILED_PRECONDITION by default: no client retries it) until the returned lift is called; they never
   * reach the server. `refusedCalls()` counts them.
   */
  refuse(method: string, text: string, code = 9): () => void {
    const refusal: Refusal = {
      matches: (call) => call.method.endsWith(`/${method}`) && !!call.request?.includes(text),
      code,
    };
    this.refusals.push(refusal);
    return () => void this.refusals.splice(this.refusals.indexOf(refusal), 1);
  }

  refusedCalls(): number {
    return this.refused;
  }

  /** Calls held now (arrived while a hold matched them, not yet released). */
  heldCalls(): number {
    return this.holds.reduce((sum, hold) => sum + hold.queue.length, 0);
  }

  private forward(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    const call: ProxiedCall = { method: String(headers[':path']), open: true };
    this.calls.push(call);
    const forwarded: http2.OutgoingHttpHeaders = { ':method': 'POST', ':path': headers[':path'] };
    for (const [name, value] of Object.entries(headers)) if (!name.startsWith(':')) forwarded[name] = value;
    const finish = () => (call.open = false);
    // Until the first message has arrived (and no hold matched it), the request is kept here.
    let upstream: http2.ClientHttp2Stream | undefined;
    let buffered: Buffer[] = [];
    let ended = false;
    const connect = () => {
      if (stream.closed) return;
      upstream = this.upstream.request(forwarded);
      this.relay(stream, upstream, finish);
      for (const chunk of buffered) upstream.write(chunk);
      buffered = [];
      if (ended) upstream.end();
    };
    let received = Buffer.alloc(0);
    let decided = false;
    stream.on('data', (chunk: Buffer) => {
      if (call.request === undefined) {
        received = Buffer.concat([received, chunk]);
        call.request = firstMessage(received, headers['grpc-encoding']);
      }
      if (upstream) return void upstream.write(chunk);
      buffered.push(chunk);
      if (decided || call.request === undefined) return;
      decided = true;
      const refusal = this.refusals.find((candidate) => candidate.matches(call));
      if (refusal) {
        this.refused++;
        stream.respond(
          {
            ':status': 200,
            'content-type': 'application/grpc',
            'grpc-status': String(refusal.code),
            'grpc-message': 'refused by the test proxy',
          },
          { endStream: true },
        );
        return finish();
      }
      const hold = this.holds.find((candidate) => candidate.matches(call));
      if (hold) hold.queue.push(connect);
      else connect();
    });
    stream.on('end', () => {
      if (upstream) upstream.end();
      else ended = true;
    });
    stream.on('close', () => {
      finish();
      if (upstream && !upstream.closed) upstream.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.on('error', () => upstream?.destroy());
  }

  private relay(stream: http2.ServerHttp2Stream, upstream: http2.ClientHttp2Stream, finish: () => void): void {
    upstream.on('response', (response) => {
      const { ':status': status, ...rest } = response;
      // A trailers-only answer (an error at once) carries its status in the headers and ends there.
      const trailersOnly = rest['grpc-status'] !== undefined;
      stream.respond({ ':status': status, ...rest }, trailersOnly ? { endStream: true } : { waitForTrailers: true });
    });
    upstream.on('data', (chunk: Buffer) => stream.write(chunk));
    let trailers: http2.OutgoingHttpHeaders = {};
    upstream.on('trailers', (received) => (trailers = received));
    stream.on('wantTrailers', () => stream.sendTrailers(trailers));
    upstream.on('end', () => {
      finish();
      if (!stream.closed) stream.end();
    });
    upstream.on('error', () => stream.destroy());
  }
}

interface Refusal {
  matches(call: ProxiedCall): boolean;
  code: number;
}

interface Hold {
  matches(call: ProxiedCall): boolean;
  queue: (() => void)[];
}

/** The first length-prefixed gRPC message once it has fully arrived, decompressed if it says so. */
function firstMessage(frame: Buffer, encoding: string | string[] | undefined): Buffer | undefined {
  if (frame.length < 5) return undefined;
  const length = frame.readUInt32BE(1);
  if (frame.length < 5 + length) return undefined;
  const message = frame.subarray(5, 5 + length);
  if (frame[0] !== 1) return message;
  return encoding === 'gzip' ? zlib.gunzipSync(message) : encoding === 'deflate' ? zlib.inflateSync(message) : message;
}
