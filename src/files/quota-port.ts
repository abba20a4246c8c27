// How many files (and bytes of them) each API key keeps on the resource backend, as a port
// with an embedded and a Redis adapter passing the same contract tests (test/files/). An
// upload holds its room before it goes upstream, so concurrent uploads cannot overshoot a
// cap; the hold becomes the file when the upstream's reply names it, or is given back. A
// hold of a gateway that died mid-upload lapses after its time.

export interface FileUsage {
  readonly files: number
  readonly bytes: number
}

export interface FileCaps {
  readonly files: number
  readonly bytes: number
}

export type HoldOutcome =
  | { readonly held: true }
  /** The upload would pass a cap; `usage` is what the key holds now (files and live holds). */
  | { readonly held: false; readonly usage: FileUsage }

export interface FileQuotaStore {
  /** Holds room for one upload of `bytes` under `keyId`'s caps, for `holdMs` at most. */
  hold(keyId: string, hold: string, bytes: number, caps: FileCaps, holdMs: number): Promise<HoldOutcome>
  /** The upload became file `fileId` of `bytes`: the hold is replaced by the file. */
  commit(keyId: string, hold: string, fileId: string, bytes: number): Promise<void>
  /** The upload did not become a file: its hold is given back. */
  cancel(keyId: string, hold: string): Promise<void>
  /** File `fileId` was deleted: its share goes back to the key that uploaded it. */
  release(fileId: string): Promise<void>
  /** What `keyId` holds now: its files and its live holds. */
  usage(keyId: string): Promise<FileUsage>
  close(): Promise<void>
}
