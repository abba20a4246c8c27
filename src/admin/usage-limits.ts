// How far a usage query reaches: shared by the admin routes, the portal and the command
// line (which splits a longer range into windows of this size), without loading either.

/** Days covered when the query names no `from`. */
export const DEFAULT_USAGE_DAYS = 30
/** Longest range one query may cover. */
export const MAX_USAGE_DAYS = 366
