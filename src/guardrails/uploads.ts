// Uploaded JSONL checked at the door: a file uploaded for a batch (purpose `batch`) or for
// fine-tuning (`fine-tune`) is text that will reach a model, stored at the upstream before
// any call runs. Each line is read from the spooled upload (never held whole) and checked
// under the uploader's policy:
//   - a batch line's `body` through the one walk of text-bearing fields (text-fields.ts), as
//     the call it becomes is checked when it runs;
//   - a fine-tuning line's every string: all of it is training data (messages, prompts,
//     completions, preference pairs);
//   - a line that is not JSON as one text (the upstream refuses it, but not before it has it).
// A file is never masked: a stored file changed by the gateway would differ from what its
// owner holds (offsets, hashes, a download that does not match), so a `mask` refuses a file
// as a `block` does, and only a `flag` lets it through, recorded.
import { createInterface } from 'node:readline'
import busboy from 'busboy'
import { gatewayError } from '../errors.ts'
import type { MultipartBody } from '../http/body.ts'
import type { CompiledPolicy } from './policy.ts'
import { hitsIn, type Finding } from './scan.ts'
import { walkTexts } from './text-fields.ts'

/** The purposes whose files are checked, and how a line's texts are found. */
const PURPOSES = ['batch', 'fine-tune'] as const
export type UploadPurpose = (typeof PURPOSES)[number]

/** The upload's purpose when its file is checked; undefined: not a purpose guardrails read (images, assistants). */
export function uploadPurposeOf(body: MultipartBody): UploadPurpose | undefined {
  const purpose = body.fields.purpose
  return PURPOSES.find((p) => p === purpose)
}

/** A finding in an uploaded file: the line (from 1) and the path inside it. */
export interface UploadFinding extends Finding {
  readonly line: number
}

export interface UploadVerdict {
  readonly findings: readonly UploadFinding[]
  /** The first block or mask: the upload is refused. */
  readonly blocked?: UploadFinding
}

type Visit = (text: string, path: () => string) => void

/** Every string of `value` with its path (`messages[0].content`), in order. */
function everyString(value: unknown, visit: Visit, path = ''): void {
  if (typeof value === 'string') visit(value, () => path)
  else if (Array.isArray(value)) value.forEach((item: unknown, i) => everyString(item, visit, `${path}[${i}]`))
  else if (typeof value === 'object' && value !== null)
    for (const [name, child] of Object.entries(value)) everyString(child, visit, path === '' ? name : `${path}.${name}`)
}

/** The texts of one line of a `purpose` file, each with where it is. */
function lineTexts(raw: string, purpose: UploadPurpose, visit: Visit): void {
  let value: unknown
  try {
    value = JSON.parse(raw)
  } catch {
    visit(raw, () => 'line')
    return
  }
  if (purpose === 'fine-tune') return everyString(value, visit)
  const body = typeof value === 'object' && value !== null ? (value as Record<string, unknown>).body : undefined
  if (typeof body === 'object' && body !== null && !Array.isArray(body))
    walkTexts(body as Record<string, unknown>, (v) => visit(v.text, () => `body.${v.where()}`))
}

/** The file part of an upload, as a stream of its bytes (busboy reads the form from its spool); `stop` lets go of both. */
function filePart(body: MultipartBody): Promise<{ file?: NodeJS.ReadableStream; stop: () => void }> {
  const source = body.open()
  const parser = busboy({ headers: { 'content-type': body.contentType } })
  const stop = (): void => {
    source.destroy()
    parser.destroy()
  }
  return new Promise((resolve, reject) => {
    let found = false
    parser.on('file', (field, stream) => {
      if (field !== 'file' || found) return void stream.resume()
      found = true
      resolve({ file: stream, stop })
    })
    parser.on('close', () => {
      if (!found) resolve({ stop })
    })
    parser.on('error', reject)
    source.on('error', reject)
    source.pipe(parser)
  })
}

/** Checks an upload's file, line by line, under `policy`; stops at the first block (or mask). */
export async function scanUpload(
  body: MultipartBody,
  purpose: UploadPurpose,
  policy: CompiledPolicy,
): Promise<UploadVerdict> {
  const findings: UploadFinding[] = []
  let blocked: UploadFinding | undefined
  const { file, stop } = await filePart(body)
  if (file === undefined) return { findings }
  const lines = createInterface({ input: file, crlfDelay: Infinity })
  let number = 0
  try {
    for await (const raw of lines) {
      number++
      if (raw.trim() === '') continue
      lineTexts(raw, purpose, (text, path) => {
        if (blocked !== undefined) return
        for (const hit of hitsIn(text, policy.rules)) {
          const finding = { detector: hit.rule.detector.name, action: hit.rule.action, path: path(), line: number }
          findings.push(finding)
          if (hit.rule.action !== 'flag') {
            blocked = finding
            return
          }
        }
      })
      if (blocked !== undefined) break
    }
  } finally {
    lines.close()
    stop()
  }
  return blocked === undefined ? { findings } : { findings, blocked }
}

/** The 400 of a refused upload: the policy, the detector, the line and where in it; never the match. */
export function uploadBlockedError(policy: string, finding: UploadFinding): Error {
  const masked = finding.action === 'mask' ? ' (a file is never masked: a mask refuses it)' : ''
  return gatewayError('guardrail_blocked', {
    message: `The file was refused by the guardrail policy '${policy}': its '${finding.detector}' check${masked} matched on line ${finding.line} at ${finding.path}. The matched text is not repeated here; remove it and upload the file again.`,
    param: 'file',
  })
}
