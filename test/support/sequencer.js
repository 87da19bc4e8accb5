'use strict';
// The order phase 1 starts its suites in when they run several at a time: the longest first, so that none of them
// starts last and runs alone at the end. Jest orders by the durations it cached in an earlier run; a fresh machine
// has none, and jest then starts the largest files first, which put the 6-minute soak last. SLOWEST lists the
// suites that took 60 s or more in docs/testing.md's table, longest first; the rest keep jest's order after them.
const Sequencer = require('@jest/test-sequencer').default;

const SLOWEST = [
  'test/integration/temporal-outage.test.ts',
  'test/soak/soak-short.test.ts',
  'test/integration/forgotten-node-returns.test.ts',
  'test/integration/list-paging.test.ts',
  'test/integration/node-records.test.ts',
  'test/integration/snapshot-forget.test.ts',
  'test/sanity/csi-sanity.test.ts',
  'test/integration/pool-identity-decision.test.ts',
  'test/browser/stuck-deletion-ui.test.ts',
  'test/integration/operator-cli.test.ts',
  'test/integration/controller-rpcs.test.ts',
  'test/integration/setup-script.test.ts',
  'test/integration/create-forget-notice.test.ts',
  'test/integration/dev-stack.test.ts',
];

class SlowestFirst extends Sequencer {
  sort(tests) {
    const rank = (test) => {
      const index = SLOWEST.findIndex((suite) => test.path.endsWith(suite));
      return index === -1 ? SLOWEST.length : index;
    };
    // Array.prototype.sort is stable: the suites not listed keep jest's own order.
    return [...super.sort(tests)].sort((a, b) => rank(a) - rank(b));
  }
}

module.exports = SlowestFirst;
