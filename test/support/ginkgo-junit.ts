/**
 * A reader for the JUnit XML that Ginkgo v2 writes (`--ginkgo.junit-report`), enough for csi-sanity's and Kubernetes' storage suite's reports:
 * one <testcase> per spec, with a status attribute and a <failure>, <error> or <skipped> child.
 */

export type SpecStatus = 'passed' | 'failed' | 'skipped' | 'pending';

export interface SpecResult {
  /** The spec's full text, e.g. "[It] Controller Service [Controller Server] CreateVolume should ...". */
  name: string;
  status: SpecStatus;
  /** Skip reason (Ginkgo's "skipped - " prefix removed) or the failure message; empty for passed specs. */
  message: string;
  /** The failure's full text (location, stack), when there is one. */
  detail: string;
  seconds: number;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

export function unescapeXml(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, entity: string) => {
    if (entity.startsWith('#x')) return String.fromCodePoint(parseInt(entity.slice(2), 16));
    if (entity.startsWith('#')) return String.fromCodePoint(parseInt(entity.slice(1), 10));
    return ENTITIES[entity] ?? whole;
  });
}

function attributes(tag: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const match of tag.matchAll(/([\w:-]+)="([^"]*)"/g)) {
    const [, key, value] = match;
    if (key !== undefined && value !== undefined) found.set(key, unescapeXml(value));
  }
  return found;
}

/** The first <name ...>text</name> or <name .../> inside body: its attributes and its text. */
function child(body: string, name: string): { attributes: Map<string, string>; text: string } | undefined {
  const match = new RegExp(`<${name}\\b([^>]*?)(?:/>|>([\\s\\S]*?)</${name}>)`).exec(body);
  if (!match) return undefined;
  return { attributes: attributes(match[1] ?? ''), text: unescapeXml(match[2] ?? '') };
}

function statusOf(declared: string | undefined, body: string): SpecStatus {
  if (declared === 'passed' || declared === 'skipped' || declared === 'pending') return declared;
  if (declared !== undefined && declared !== '') return 'failed'; // failed, panicked, interrupted, aborted, timedout
  if (child(body, 'failure') || child(body, 'error')) return 'failed';
  if (child(body, 'skipped')) return 'skipped';
  return 'passed';
}

export function parseJunit(xml: string): SpecResult[] {
  const specs: SpecResult[] = [];
  for (const match of xml.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const attrs = attributes(match[1] ?? '');
    const body = match[2] ?? '';
    const status = statusOf(attrs.get('status'), body);
    let message = '';
    let detail = '';
    if (status === 'failed') {
      const failure = child(body, 'failure') ?? child(body, 'error');
      message = failure?.attributes.get('message') ?? '';
      detail = failure?.text ?? '';
    } else if (status === 'skipped' || status === 'pending') {
      message = (child(body, 'skipped')?.attributes.get('message') ?? '').replace(/^skipped\s*-?\s*/, '');
    }
    specs.push({ name: attrs.get('name') ?? '', status, message, detail, seconds: Number(attrs.get('time') ?? 0) });
  }
  return specs;
}

export interface GinkgoSummary {
  ran: number;
  total: number;
  passed: number;
  failed: number;
  pending: number;
  skipped: number;
}

/** Ginkgo's closing lines: "Ran 60 of 93 Specs in 12.3 seconds" and "FAIL! -- 10 Passed | 50 Failed | 0 Pending | 33 Skipped". */
export function parseGinkgoSummary(output: string): GinkgoSummary | undefined {
  // eslint-disable-next-line no-control-regex -- Ginkgo colours its output unless told not to
  const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
  const ran = /Ran (\d+) of (\d+) Specs?/.exec(plain);
  const counts = /(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped/.exec(plain);
  if (!ran || !counts) return undefined;
  return {
    ran: Number(ran[1]),
    total: Number(ran[2]),
    passed: Number(counts[1]),
    failed: Number(counts[2]),
    pending: Number(counts[3]),
    skipped: Number(counts[4]),
  };
}
