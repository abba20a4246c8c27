// Learned output reservations: what a call that names no output cap reserves against the
// token-rate limits, learned from what calls like it really produced.
//
// Every such call's completion tokens per reply, as its upstream reported them at settle, go
// into three sketches (sketch.ts): the key's calls to the model, the tier's, and the model's.
// A new call reserves the tier's quantile (default p95) of the first of them that has seen
// minSamples decayed observations, or that sketch's length-weighted mean E[X²] / E[X] when it
// is higher (the tail held: a reply runs for a time in proportion to its length, so the calls
// in flight at a moment are that much longer than the calls made; reserving their mean makes
// what the long ones write past their reservation, on average, what the short ones leave
// unused; a bare p95 leaves a window's running calls short on average whenever fewer than 5 %
// of replies are long), within the tier's floor and ceiling and never above the
// fixed reservation (outputCap's: the upstream is still sent that cap, so the call cannot
// produce more than it). A call that turns out longer is charged in full at settle, like
// any other (limiter.ts). Budgets and the lifetime quota keep holding the fixed reservation.
//
// The sketches are read on admission through a short cache (refreshed in the background
// once older than refreshMs; an instance adds its own observations to it at once), so a call
// pays no extra round trip once a sketch is known, and a store that does not answer quickly
// leaves the call on the fixed reservation.
import type { OutputReservationConfig, TierConfig } from '../config/schema.ts'
import type { Logger } from '../observability/logger.ts'
import { countOf, lengthWeightedMeanOf, observe, quantileOf, type Sketch } from './sketch.ts'
import type { SketchStore } from './store.ts'
import type { OutputReservationView, ReservationSource, ReservationSubject } from './view.ts'

export interface ReservationSettings {
  readonly mode: 'learned' | 'fixed'
  readonly quantile: number
  readonly floor: number
  readonly ceiling: number | undefined
  readonly minSamples: number
  readonly halfLifeMs: number
}

/**
 * The defaults: learned, at p95 (or the length-weighted mean, when higher), once 100 decayed
 * observations back it, with a one-hour half-life. 100 observations see a tail of 3 % of
 * replies with 95 % probability (20 missed a 4 % one half the time, and the first windows then
 * passed output_tpm by 10–20 % in bench/learned-reservations.ts); an hour follows a change of
 * traffic within the afternoon without forgetting the morning at once. A floor of 16 keeps a
 * run of one-word replies from reserving nothing.
 */
export const RESERVATION_DEFAULTS = {
  mode: 'learned',
  quantile: 0.95,
  floor: 16,
  minSamples: 100,
  halfLifeSeconds: 3600,
} as const

export function settingsOf(config: OutputReservationConfig | undefined): ReservationSettings {
  return {
    mode: config?.mode ?? RESERVATION_DEFAULTS.mode,
    quantile: config?.quantile ?? RESERVATION_DEFAULTS.quantile,
    floor: config?.floor ?? RESERVATION_DEFAULTS.floor,
    ceiling: config?.ceiling,
    minSamples: config?.minSamples ?? RESERVATION_DEFAULTS.minSamples,
    halfLifeMs: (config?.halfLifeSeconds ?? RESERVATION_DEFAULTS.halfLifeSeconds) * 1000,
  }
}

export interface Learned {
  /** Tokens per reply reserved. */
  readonly perReply: number
  readonly source: ReservationSource
}

const SOURCES: readonly ReservationSource[] = ['key', 'tier', 'model']

/** The three sketches of a subject, most specific first. The half-life is part of the name: sketches decayed at different rates never mix. */
function scopesOf(subject: ReservationSubject, halfLifeMs: number): string[] {
  return [
    JSON.stringify(['k', halfLifeMs, subject.keyId, subject.model]),
    JSON.stringify(['t', halfLifeMs, subject.tier, subject.model]),
    JSON.stringify(['m', halfLifeMs, subject.model]),
  ]
}

function decide(
  sketches: readonly Sketch[],
  settings: ReservationSettings,
  now: number,
  holdTail: boolean,
): Learned | undefined {
  for (const [i, sketch] of sketches.entries()) {
    if (countOf(sketch, now, settings.halfLifeMs) < settings.minSamples) continue
    const q = quantileOf(sketch, settings.quantile)
    const source = SOURCES[i]
    if (q === undefined || source === undefined) continue
    // The tail held: never less than the mean length of the calls in flight (length-weighted),
    // so that what the running calls write beyond their reservations is, on average, what the
    // shorter ones leave unused (see the header).
    const held = holdTail ? Math.max(q, lengthWeightedMeanOf(sketch) ?? 0) : q
    const lifted = Math.max(Math.ceil(held), settings.floor)
    return { perReply: settings.ceiling === undefined ? lifted : Math.min(lifted, settings.ceiling), source }
  }
  return undefined
}

export interface LearnedReservationsOptions {
  readonly store: SketchStore
  readonly log: Logger
  /** How old a cached read may get before it is read again (in the background). Default 1 s. */
  readonly refreshMs?: number
  /** Longest wait for a first read on admission; past it the call is reserved the fixed way. Default 100 ms. */
  readonly readTimeoutMs?: number
  readonly now?: () => number
  /** Reserve at least the length-weighted mean (the tail held). Default true; false: the bare quantile (bench/learned-reservations.ts compares). */
  readonly holdTail?: boolean
}

export interface LearnedReservations {
  /** The learned reservation per reply for a call of this subject; undefined: the fixed one. */
  lookup(subject: ReservationSubject, settings: ReservationSettings): Promise<Learned | undefined>
  /** One settled call's completion tokens per reply. Never throws, never waits. */
  observe(subject: ReservationSubject, settings: ReservationSettings, tokensPerReply: number): void
  /** Where the reservation stands, read fresh (/admin, the portal). */
  describe(subject: ReservationSubject, tier: TierConfig | undefined): Promise<OutputReservationView>
}

/** Reads older than this many scopes are let go from the cache first. */
const MAX_CACHED = 10_000

export function createLearnedReservations(options: LearnedReservationsOptions): LearnedReservations {
  const { store, log } = options
  const now = options.now ?? Date.now
  const refreshMs = options.refreshMs ?? 1000
  const readTimeoutMs = options.readTimeoutMs ?? 100
  const holdTail = options.holdTail ?? true
  const cache = new Map<string, { sketches: Sketch[]; readAt: number; reading?: Promise<void> }>()

  function read(id: string, scopes: string[]): Promise<void> {
    const entry = cache.get(id)
    if (entry?.reading !== undefined) return entry.reading
    const reading = store
      .read(scopes, now())
      .then((sketches) => {
        cache.delete(id)
        cache.set(id, { sketches, readAt: now() })
        if (cache.size > MAX_CACHED) {
          const oldest = cache.keys().next().value
          if (oldest !== undefined) cache.delete(oldest)
        }
      })
      .catch((error: unknown) => {
        // Kept as read now (a store away: nothing known), so that calls do not each wait for
        // it; it is tried again behind a call once refreshMs has passed.
        if (entry !== undefined) delete entry.reading
        else cache.set(id, { sketches: [], readAt: now() })
        log.debug(
          { err: error instanceof Error ? error.message : String(error) },
          'output reservations: sketch read failed',
        )
      })
    if (entry !== undefined) entry.reading = reading
    return reading
  }

  return {
    async lookup(subject, settings) {
      if (settings.mode !== 'learned') return undefined
      const scopes = scopesOf(subject, settings.halfLifeMs)
      const id = scopes.join('\u0000')
      const cached = cache.get(id)
      if (cached === undefined) {
        let timer: NodeJS.Timeout | undefined
        const late = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, readTimeoutMs)
          timer.unref()
        })
        await Promise.race([read(id, scopes), late])
        clearTimeout(timer)
      } else if (now() - cached.readAt > refreshMs) {
        void read(id, scopes)
      }
      const found = cache.get(id)
      return found === undefined ? undefined : decide(found.sketches, settings, now(), holdTail)
    },

    observe(subject, settings, tokensPerReply) {
      if (settings.mode !== 'learned' || !Number.isFinite(tokensPerReply) || tokensPerReply < 0) return
      const scopes = scopesOf(subject, settings.halfLifeMs)
      const at = now()
      // This instance sees its own calls at once; the others' with its next read.
      for (const sketch of cache.get(scopes.join('\u0000'))?.sketches ?? []) {
        observe(sketch, tokensPerReply, at, settings.halfLifeMs)
      }
      store
        .observe(scopes, tokensPerReply, at, settings.halfLifeMs)
        .catch((error: unknown) =>
          log.debug(
            { err: error instanceof Error ? error.message : String(error) },
            'output reservations: observation not recorded',
          ),
        )
    },

    async describe(subject, tier) {
      const settings = settingsOf(tier?.outputReservation)
      const at = now()
      const sketches = await store.read(scopesOf(subject, settings.halfLifeMs), at)
      const samples = (i: number): number => {
        const sketch = sketches[i]
        return sketch === undefined ? 0 : Math.round(countOf(sketch, at, settings.halfLifeMs) * 100) / 100
      }
      const learned = settings.mode === 'learned' ? decide(sketches, settings, at, holdTail) : undefined
      return {
        object: 'output_reservation',
        model: subject.model,
        tier: subject.tier,
        mode: settings.mode,
        reserved_per_reply: learned?.perReply ?? null,
        source: learned?.source ?? null,
        samples: { key: samples(0), tier: samples(1), model: samples(2) },
        quantile: settings.quantile,
        floor: settings.floor,
        ceiling: settings.ceiling ?? null,
        min_samples: settings.minSamples,
        half_life_seconds: settings.halfLifeMs / 1000,
      }
    },
  }
}
