// Per-campaign numbers (issue #49). The API's ids of evaluations, stop
// attempts, questions and claims are global across campaigns: a campaign's
// first question may be id 16. What the console shows is each one's place in
// its campaign (1, 2, 3... in the order of record); the ids stay in the API,
// in links and in titles.

export class Numbers {
  constructor() {
    /** sort ('evaluation', 'stop', 'question', 'claim') -> Map(id -> n) */
    this.maps = new Map();
  }

  /** The ids of one sort, all of the campaign's: true when the numbers changed. */
  set(sort, ids) {
    const sorted = [...new Set(ids.filter((x) => typeof x === 'number' && Number.isFinite(x)))].sort((a, b) => a - b);
    const next = new Map(sorted.map((id, i) => [id, i + 1]));
    const was = this.maps.get(sort);
    this.maps.set(sort, next);
    return !was || was.size !== next.size || sorted.some((id) => was.get(id) !== next.get(id));
  }

  /** One more id of a sort, newer than those known (ids rise). */
  add(sort, id) {
    const m = this.maps.get(sort) || new Map();
    this.maps.set(sort, m);
    if (typeof id === 'number' && !m.has(id) && [...m.keys()].every((k) => k < id)) m.set(id, m.size + 1);
  }

  /** The number of `id` in its campaign, or null when it is not known. */
  n(sort, id) {
    const m = this.maps.get(sort);
    return (m && m.get(id)) ?? null;
  }

  /** `#3` (its place in the campaign), or `id 16` when its place is not known. */
  tag(sort, id) {
    const n = this.n(sort, id);
    return n === null ? `id ${id}` : `#${n}`;
  }

  /** `question 3`, or `question (id 16)` when its place is not known. */
  name(sort, id, word = sort) {
    const n = this.n(sort, id);
    return n === null ? `${word} (id ${id})` : `${word} ${n}`;
  }
}
