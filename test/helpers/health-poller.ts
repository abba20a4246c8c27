// Polls GET /healthz every 20 ms on a connection of its own and times each answer: how a
// test or a benchmark sees whether the gateway's event loop was free while it worked.
import { Agent, request } from 'node:http'

export interface HealthReadings {
  readonly polls: number
  readonly worstMs: number
  /** Polls that failed or answered other than 200. */
  readonly failures: number
}

export interface HealthPoller {
  stop(): Promise<HealthReadings>
}

export function pollHealth(url: string, everyMs = 20): HealthPoller {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  let running = true
  let polls = 0
  let worstMs = 0
  let failures = 0
  const once = (): Promise<void> =>
    new Promise((done) => {
      const started = performance.now()
      const req = request(`${url}/healthz`, { agent, timeout: 120_000 }, (res) => {
        res.resume()
        res.once('end', () => {
          worstMs = Math.max(worstMs, performance.now() - started)
          polls++
          if (res.statusCode !== 200) failures++
          done()
        })
      })
      req.once('error', () => {
        failures++
        done()
      })
      req.end()
    })
  const loop = (async () => {
    while (running) {
      await once()
      await new Promise((r) => setTimeout(r, everyMs))
    }
  })()
  return {
    async stop() {
      running = false
      await loop
      agent.destroy()
      return { polls, worstMs, failures }
    },
  }
}
