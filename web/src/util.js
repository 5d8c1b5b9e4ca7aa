// Small DOM and formatting helpers.
export function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

// "in 4 min", "12 s ago"; one unit, the largest that fits.
export function relTime(ms, now = Date.now()) {
  if (ms == null || ms <= 0) return '–';
  const d = (ms - now) / 1000;
  const a = Math.abs(d);
  let text;
  if (a < 60) text = `${Math.round(a)} s`;
  else if (a < 3600) text = `${Math.round(a / 60)} min`;
  else if (a < 86400) text = `${(a / 3600).toFixed(1)} h`;
  else text = `${(a / 86400).toFixed(1)} d`;
  return d >= 0 ? `in ${text}` : `${text} ago`;
}

export function clock(ms) {
  if (!ms) return '–';
  return new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

export function secs(s) {
  if (s == null || s < 0) return '–';
  if (s < 90) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 5400) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

export function num(v, digits = 1) {
  if (v == null || !Number.isFinite(v)) return '–';
  return Number.isInteger(v) ? String(v) : v.toFixed(digits);
}

export function table(headers, rows, { empty = 'nothing to show', rowAttrs = () => '' } = {}) {
  if (!rows.length) return `<div class="empty">${esc(empty)}</div>`;
  const th = headers.map((h) => `<th class="${h.num ? 'num' : ''}">${esc(h.label)}</th>`).join('');
  const tr = rows
    .map((r, i) => `<tr ${rowAttrs(i)}>${r.map((c, j) => `<td class="${headers[j].num ? 'num' : ''}">${c}</td>`).join('')}</tr>`)
    .join('');
  return `<table><thead><tr>${th}</tr></thead><tbody>${tr}</tbody></table>`;
}

export function badge(text, cls = '') {
  return `<span class="badge ${cls}">${esc(text)}</span>`;
}
