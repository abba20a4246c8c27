// ingest-master: ingestion tasks, as the provider's Local KB Guide drives them.
// POST /api/v1/task {filePath, role, metadata} queues a task; POST /api/v1/tasks/file
// ?file_path=&role= lists that file's tasks, oldest first (the guide reads the last one).
// A task is "queued", then "ingesting", then "ingested" (or "ingestion_failed" for a file
// whose path says "fail"), one status step apart. Tasks belong to their caller.
// POST /api/v1/ingest {file_ids} is the mock's earlier, synchronous spelling, kept.
import { keepNewest } from './bounded.ts'
import { stageAt, type Pace } from './progress.ts'
import { callerOwner, mockId, readJson, reply, replyList, detail, type MockExchange } from './reply.ts'

export type IngestStatus = 'queued' | 'ingesting' | 'ingested' | 'ingestion_failed'

/** Files with tasks remembered by the mock in all (the oldest are forgotten past this). */
const MAX_FILES = 10_000

interface Task {
  readonly taskId: string
  readonly filePath: string
  readonly role: string
  readonly metadata: Record<string, unknown>
  readonly fails: boolean
  readonly since: number
}

const failsOn = (path: string): boolean => path.includes('fail')

export function createIngestService(pace: Pace): (x: MockExchange) => Promise<boolean> {
  const tasks = new Map<string, Task[]>() // owner, role, file path → its tasks, oldest first
  let sequence = 0

  const view = (t: Task): Record<string, unknown> => ({
    taskId: t.taskId,
    filePath: t.filePath,
    role: t.role,
    metadata: t.metadata,
    status: stageAt<IngestStatus>(pace, t.since, ['queued', 'ingesting', t.fails ? 'ingestion_failed' : 'ingested']),
  })

  return async (x) => {
    if (x.req.method !== 'POST') return false
    if (/^\/api\/v1\/task\/?$/.test(x.path)) {
      const body = await readJson(x.req)
      const { filePath, role } = body
      const metadata = body.metadata ?? {}
      if (typeof filePath !== 'string' || filePath === '' || typeof role !== 'string' || role === '') {
        detail(x, 422, 'filePath and role are required (mock)')
        return true
      }
      if (typeof metadata !== 'object' || metadata === null || Array.isArray(metadata)) {
        detail(x, 422, 'metadata must be an object (mock)')
        return true
      }
      const key = `${callerOwner(x.req)}\u0000${role}\u0000${filePath}`
      const task: Task = {
        taskId: mockId('task', key, String(sequence++)),
        filePath,
        role,
        metadata: metadata as Record<string, unknown>,
        fails: failsOn(filePath),
        since: pace.now(),
      }
      const list = tasks.get(key) ?? []
      tasks.delete(key) // re-inserted: the newest file is the last to be forgotten
      tasks.set(key, [...list.slice(-99), task])
      keepNewest(tasks, MAX_FILES)
      reply(x, 202, view(task))
      return true
    }
    if (/^\/api\/v1\/tasks\/file\/?$/.test(x.path)) {
      const filePath = x.query.get('file_path')
      const role = x.query.get('role')
      if (filePath === null || filePath === '' || role === null || role === '') {
        detail(x, 422, 'the query needs file_path and role (mock)')
        return true
      }
      const list = tasks.get(`${callerOwner(x.req)}\u0000${role}\u0000${filePath}`)
      if (list === undefined) detail(x, 404, 'No ingestion task for this file (mock)')
      else replyList(x, 200, list.map(view))
      return true
    }
    if (/^\/api\/v1\/ingest(ions?)?\/?$/.test(x.path)) {
      const body = await readJson(x.req)
      const ids = Array.isArray(body.file_ids) ? body.file_ids.filter((id): id is string => typeof id === 'string') : []
      if (ids.length === 0) {
        detail(x, 422, 'file_ids must list at least one file id (mock)')
        return true
      }
      reply(x, 202, {
        job_id: mockId('ingest', ...ids),
        results: ids.map((id) => ({ file_id: id, status: failsOn(id) ? 'ingestion_failed' : 'ingested' })),
      })
      return true
    }
    return false
  }
}
