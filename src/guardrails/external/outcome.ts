// What an external check said about a call's texts. A service's own words never get
// further than this: a deny's reason is a short code the schema checked, a rewrite's texts
// go into the body and nowhere else, a failure's problem names what happened, not what
// the service answered.

/** One text of the call and where it is (a `param`: `messages[1].content`). */
export interface PlacedText {
  readonly path: string
  readonly text: string
}

export type Outcome =
  | { readonly verdict: 'allow' }
  /** `reason`: a code (the webhook's, or the moderation category); `path`: the text it was about, when known. */
  | { readonly verdict: 'deny'; readonly reason: string; readonly path?: string }
  /** New texts by path, each a path that was sent. */
  | { readonly verdict: 'rewrite'; readonly texts: readonly PlacedText[] }
  | { readonly verdict: 'error' | 'timeout'; readonly problem: string }

export type Verdict = Outcome['verdict']
export const VERDICTS: readonly Verdict[] = ['allow', 'deny', 'rewrite', 'error', 'timeout']
