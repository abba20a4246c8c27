// A coordinator on an in-memory embedded store and a local runner, closed when the test
// ends: what the coordinator's and the processor's tests build before anything else.
import type { Test } from 'tap'
import { createLogger } from '../../src/observability/logger.ts'
import { Coordinator } from '../../src/queue/coordinator.ts'
import { openEmbeddedQueueStore } from '../../src/queue/embedded-store.ts'
import { createLocalRunner } from '../../src/queue/local-runner.ts'
import { localSignals } from '../../src/queue/signals.ts'

/** Instance 'here' with no tier priorities, unless the test says otherwise. */
export function localCoordinator(
  t: Test,
  options: { instance?: string; tierPriority?: Readonly<Record<string, number>> } = {},
) {
  const store = openEmbeddedQueueStore({ dataDir: ':memory:', resultTtlMs: 60_000 })
  const runner = createLocalRunner()
  const coordinator = new Coordinator({
    store,
    runner,
    instance: options.instance ?? 'here',
    tierPriority: options.tierPriority ?? {},
    log: createLogger('silent'),
    signals: localSignals,
  })
  t.teardown(async () => {
    await coordinator.close()
    await runner.close()
    await store.close()
  })
  return { store, runner, coordinator }
}
