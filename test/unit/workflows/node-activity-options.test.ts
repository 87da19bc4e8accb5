import { NON_RETRYABLE_TYPES } from '../../../common/failures';
import {
  createCompletionOptions,
  createFirstTryOptions,
  deleteOptions,
  expandOptions,
} from '../../../workflows/node-work';

/** The values each workflow wrote inline before they were gathered here (e1a0f50): moving them changed none. */
describe('node activity options', () => {
  const untilTheNodeAnswers = {
    initialInterval: '1s',
    maximumInterval: '30s',
    nonRetryableErrorTypes: [...NON_RETRYABLE_TYPES],
  };

  it("create's first try: only on a node that picks it up within 20 s, one attempt, 5 s heartbeat", () => {
    expect(createFirstTryOptions('d.io', 'node-1')).toEqual({
      taskQueue: 'd.io/node/node-1',
      scheduleToStartTimeout: '20s',
      startToCloseTimeout: '60s',
      heartbeatTimeout: '5s',
      retry: { maximumAttempts: 1 },
    });
  });

  it("create's completion: no schedule-to-start timeout, retried on the node until it answers", () => {
    expect(createCompletionOptions('d.io', 'node-1')).toEqual({
      taskQueue: 'd.io/node/node-1',
      startToCloseTimeout: '60s',
      heartbeatTimeout: '5s',
      retry: untilTheNodeAnswers,
    });
  });

  it('delete and expand: no schedule-to-start timeout, 10 s heartbeat, expand allowed 5 minutes', () => {
    expect(deleteOptions('d.io', 'node-1', 'why')).toEqual({
      taskQueue: 'd.io/node/node-1',
      startToCloseTimeout: '60s',
      heartbeatTimeout: '10s',
      retry: untilTheNodeAnswers,
      summary: 'why',
    });
    expect(expandOptions('d.io', 'node-1', 'why')).toEqual({
      taskQueue: 'd.io/node/node-1',
      startToCloseTimeout: '5m',
      heartbeatTimeout: '10s',
      retry: untilTheNodeAnswers,
      summary: 'why',
    });
  });
});
