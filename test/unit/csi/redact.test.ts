import { redactSecrets } from '../../../csi/redact';

describe('redactSecrets', () => {
  it('masks every value of a top-level secrets map and keeps its keys', () => {
    const request = { name: 'pvc-1', secrets: { username: 'admin', password: 'hunter2' } };
    expect(redactSecrets(request)).toEqual({ name: 'pvc-1', secrets: { username: '***', password: '***' } });
  });

  it('masks secrets maps at any depth, including inside arrays', () => {
    const request = {
      volume_id: 'v1_node-a_0123456789abcdef_0123456789abcdef0123456789abcdef',
      outer: {
        secrets: { token: 'outer-token' },
        inner: { deeper: { secrets: { key: 'deep-key' }, keep: 'visible' } },
      },
      items: [{ secrets: { a: 'in-array' } }, { other: 'x' }, [{ secrets: { b: 'nested-array' } }]],
    };
    const redacted = redactSecrets(request);
    expect(redacted).toEqual({
      volume_id: 'v1_node-a_0123456789abcdef_0123456789abcdef0123456789abcdef',
      outer: {
        secrets: { token: '***' },
        inner: { deeper: { secrets: { key: '***' }, keep: 'visible' } },
      },
      items: [{ secrets: { a: '***' } }, { other: 'x' }, [{ secrets: { b: '***' } }]],
    });
    const text = JSON.stringify(redacted);
    for (const secret of ['outer-token', 'deep-key', 'in-array', 'nested-array']) expect(text).not.toContain(secret);
  });

  it('leaves fields not named secrets untouched, including look-alikes', () => {
    const request = {
      parameters: { secret: 'not-a-secret-field', 'csi.storage.k8s.io/pvc/name': 'data' },
      secretsRef: { name: 'kept' },
      count: 3,
      flag: false,
      nothing: null,
      missing: undefined,
      list: ['a', 1, null],
    };
    expect(redactSecrets(request)).toEqual(request);
  });

  it('masks an empty secrets map to an empty map and leaves a null secrets field null', () => {
    expect(redactSecrets({ secrets: {} })).toEqual({ secrets: {} });
    expect(redactSecrets({ secrets: null })).toEqual({ secrets: null });
  });

  it('does not mutate its input', () => {
    const request = {
      name: 'pvc-1',
      secrets: { password: 'hunter2' },
      nested: { secrets: { token: 't0ken' } },
      list: [{ secrets: { k: 'v' } }],
    };
    const before = structuredClone(request);
    const redacted = redactSecrets(request);
    expect(request).toEqual(before);
    expect(request.secrets.password).toBe('hunter2');
    expect(redacted).not.toBe(request);
    expect(redacted.secrets).not.toBe(request.secrets);
    expect(redacted.nested).not.toBe(request.nested);
    expect(redacted.list).not.toBe(request.list);
  });

  it('passes primitives, null and Buffers through', () => {
    expect(redactSecrets('text')).toBe('text');
    expect(redactSecrets(42)).toBe(42);
    expect(redactSecrets(null)).toBeNull();
    expect(redactSecrets(undefined)).toBeUndefined();
    const buffer = Buffer.from('bytes');
    expect(redactSecrets({ data: buffer }).data).toBe(buffer);
  });

  it('masks the secrets of a top-level array of requests', () => {
    expect(redactSecrets([{ secrets: { a: '1' } }, { secrets: { b: '2' } }])).toEqual([
      { secrets: { a: '***' } },
      { secrets: { b: '***' } },
    ]);
  });
});
