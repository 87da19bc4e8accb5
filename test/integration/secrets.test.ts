import fs from 'node:fs';
import path from 'node:path';
import { createWorkflowId, deleteWorkflowId } from '../../common/names';
import { TestCluster } from '../support/cluster';
import { createRequest, createVolume, deleteVolume, retryLikeCo } from '../support/csi-requests';

/** Invariant 6: secrets in CSI requests never reach workflow inputs, histories or logs. */
describe('secrets', () => {
  const cluster = new TestCluster('secrets');
  afterAll(() => cluster.teardown());

  it('appear in no workflow history and no log line', async () => {
    const secret = 'hunter2-do-not-store-this';
    await cluster.startNode('node-1');
    const clients = cluster.csi((await cluster.startController()).endpoint);
    const created = await retryLikeCo(() =>
      createVolume(clients, { ...createRequest('pvc-with-secrets'), secrets: { password: secret } }),
    );
    const volumeId = created.volume!.volume_id;
    await retryLikeCo(
      () =>
        new Promise((resolve, reject) =>
          clients.controller.DeleteVolume(
            { volume_id: volumeId, secrets: { token: secret } },
            { deadline: Date.now() + 15_000 },
            (error, response) => (error ? reject(error) : resolve(response)),
          ),
        ),
    );
    await retryLikeCo(() => deleteVolume(clients, volumeId)); // settled

    const temporal = await cluster.temporal();
    for (const workflowId of [
      createWorkflowId(cluster.driverName, 'pvc-with-secrets'),
      deleteWorkflowId(cluster.driverName, volumeId),
    ]) {
      const history = historyText(await temporal.workflow.getHandle(workflowId).fetchHistory());
      expect(history).toContain(workflowId.includes('/create/') ? 'pvc-with-secrets' : volumeId); // payloads decoded
      expect(history).not.toContain(secret);
    }
    const logs = fs.readdirSync(path.join(cluster.root, 'logs'));
    const text = logs.map((file) => fs.readFileSync(path.join(cluster.root, 'logs', file), 'utf8')).join('\n');
    expect(text).toContain('"secrets":{"password":"***"}'); // debug logging of the request did happen...
    expect(text).not.toContain(secret); // ...with the value masked
  });
});

/** The history with every payload's bytes decoded as text, so a secret inside an input would show. */
function historyText(history: unknown): string {
  return JSON.stringify(history, (_key, value: unknown) =>
    value instanceof Uint8Array ? Buffer.from(value).toString('utf8') : value,
  );
}
