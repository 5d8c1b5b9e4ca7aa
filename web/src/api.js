// The /v1 API with the logged-in token (sessionStorage: it goes when the
// tab closes, and other tabs never see it).
const KEY = 'tidal.token';

export const token = {
  get: () => sessionStorage.getItem(KEY) || '',
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// The dashboard only reads, and refreshes every few seconds: it accepts a
// replica's copy (`Tidal-Consistency: stale`), so a follower of replicated
// servers serves it too (docs/operations.md "High availability"). What only
// the leader knows (explain) answers not_leader there, naming the leader.
async function request(path, { tok = token.get(), raw = false } = {}) {
  const res = await fetch(path, {
    headers: { Authorization: `Bearer ${tok}`, 'Tidal-Consistency': 'stale' },
    cache: 'no-store',
  });
  if (!res.ok) {
    let message = `HTTP ${res.status}`;
    try {
      const body = await res.json();
      if (body && body.error && body.error.message) message = body.error.message;
    } catch (_) {
      /* not JSON: keep the status */
    }
    throw new ApiError(res.status, message);
  }
  return raw ? res.text() : res.json();
}

export const api = {
  get: (path, opts) => request(path, opts),
  text: (path) => request(path, { raw: true }),
};
