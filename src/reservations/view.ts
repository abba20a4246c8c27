// What /admin and the portal show of a learned output reservation (reservations/learned.ts).

/** Whose calls: a key, its owner, its tier, and the model. */
export interface ReservationSubject {
  readonly keyId: string
  readonly owner?: string | undefined
  readonly tier: string
  readonly model: string
}

/** Where a learned reservation comes from: the key's own calls to the model, its tier's, or the model's. */
export type ReservationSource = 'key' | 'tier' | 'model'

export interface OutputReservationView {
  readonly object: 'output_reservation'
  readonly model: string
  readonly tier: string
  readonly mode: 'learned' | 'fixed'
  /**
   * Tokens per reply a call that names no output cap reserves now on the token-rate limits;
   * null: the fixed reservation (the tier's output_cap: defaultMaxTokens, or the model's ceiling).
   */
  readonly reserved_per_reply: number | null
  /** Which sketch decided; null: none has min_samples yet (or the mode is fixed). */
  readonly source: ReservationSource | null
  /** Decayed observations in each sketch (key × model, tier × model, model). */
  readonly samples: Readonly<Record<ReservationSource, number>>
  readonly quantile: number
  readonly floor: number
  readonly ceiling: number | null
  readonly min_samples: number
  readonly half_life_seconds: number
}
