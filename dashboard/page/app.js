'use strict';
// The dashboard's page: polls the JSON API every second and draws the
// workers table and the charts itself (SVG), with nothing from elsewhere.
(function () {
  const SVG = 'http://www.w3.org/2000/svg';
  // A token in the page's URL goes with every API call, as a header.
  const token = new URLSearchParams(location.search).get('token');
  const headers = token ? { Authorization: 'Bearer ' + token } : {};
  const $ = (id) => document.getElementById(id);

  async function get(path, text) {
    const r = await fetch(path, { headers: headers, cache: 'no-store' });
    if (!r.ok) throw new Error(path + ': ' + r.status + ' ' + (await r.text()).trim());
    return text ? r.text() : r.json();
  }

  // Numbers and durations.
  function num(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(2) + 'G';
    if (a >= 1e6) return (v / 1e6).toFixed(2) + 'M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    if (Number.isInteger(v)) return String(v);
    return v.toFixed(digits === undefined ? 1 : digits);
  }
  function dur(s) {
    if (s === null || s === undefined) return '–';
    s = Math.round(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (h) return h + 'h' + String(m).padStart(2, '0') + 'm';
    if (m) return m + 'm' + String(sec).padStart(2, '0') + 's';
    return sec + 's';
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function badge(state) {
    return el('span', 'badge s-' + state, state);
  }

  // ---- the trial and its workers ----
  let config = null;
  function renderTrial(t) {
    $('trial-name').textContent = t.experiment + ' / ' + t.trial;
    document.title = t.experiment + '/' + t.trial + ' · distrl';
    const cs = $('controller-state');
    cs.textContent = 'controller ' + t.controller.state;
    cs.className = 'badge s-' + t.controller.state;
    const p = $('problem');
    p.hidden = !t.problem;
    p.textContent = t.problem || '';
    const last = t.last || {};
    $('k-steps').textContent = num(last.env_steps);
    $('k-rate').textContent = num(last.steps_per_s, 0);
    $('k-return').textContent = num(last.mean_return, 1);
    $('k-episodes').textContent = num(last.episodes);
    $('k-version').textContent = num(last.version);
    $('c-best').hidden = last.best_version === undefined;
    $('k-best').textContent = num(last.best_version) + ' (' + num(last.best_return, 2) + ')';
    $('k-elapsed').textContent = dur(last.elapsed_s);
    $('k-restarts').textContent = String(t.controller.restarts || 0);
    renderWorkers(t.workers || []);
    if (t.config !== config) {
      config = t.config;
      $('config').textContent = config;
    }
    $('updated').textContent = 'updated ' + new Date(t.time).toLocaleTimeString();
  }

  function renderWorkers(ws) {
    const body = document.querySelector('#workers tbody');
    const rows = [];
    const counts = {};
    for (const w of ws) {
      counts[w.state] = (counts[w.state] || 0) + 1;
      const tr = el('tr', 'row-' + w.state);
      tr.dataset.worker = w.name;
      if (w.stats) tr.title = Object.keys(w.stats).sort().map((k) => k + '=' + w.stats[k]).join('  ');
      tr.append(el('td', 'name', w.name), el('td', '', w.type), el('td', 'num', String(w.index)),
        el('td', '', w.host || '–'), el('td', 'num', w.pid ? String(w.pid) : '–'));
      const st = el('td', 'state');
      st.append(badge(w.state));
      tr.append(st, el('td', 'num', String(w.restarts || 0)), el('td', 'num', num(w.steps_per_s, 0)),
        el('td', 'num', num(w.mean_batch, 1)), el('td', 'num', num(w.version)));
      const msg = w.error ? el('td', 'msg err', w.error)
        : w.warning ? el('td', 'msg', w.warning) : el('td', 'msg note', w.note || '');
      tr.append(msg);
      rows.push(tr);
    }
    body.replaceChildren(...rows);
    $('worker-count').textContent = ws.length + ' workers · ' +
      Object.keys(counts).sort().map((s) => counts[s] + ' ' + s).join(', ');
    renderSelector(ws);
  }

  // ---- the log of a chosen worker ----
  function renderSelector(ws) {
    const sel = $('log-worker');
    const have = Array.from(sel.options).map((o) => o.value).join(',');
    const want = ws.map((w) => w.name);
    if (have === want.join(',')) return;
    const chosen = sel.value || want[0] || '';
    sel.replaceChildren(...want.map((n) => { const o = el('option', '', n); o.value = n; return o; }));
    sel.value = want.includes(chosen) ? chosen : (want[0] || '');
    if (sel.value && !have) pollLog();
  }
  async function pollLog() {
    const w = $('log-worker').value;
    if (!w) return;
    const pre = $('log');
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    try {
      pre.textContent = await get('/api/log?bytes=16384&worker=' + encodeURIComponent(w), true);
    } catch (e) {
      pre.textContent = String(e.message || e);
    }
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  // ---- history and charts ----
  let run = null;
  let points = [];
  async function pollHistory() {
    for (;;) {
      const h = await get('/api/history?since=' + points.length);
      if (h.run !== run) {
        // The trial started over: so do the charts.
        run = h.run;
        points = [];
        if (h.since !== 0) continue;
      }
      const got = h.points || [];
      points = points.concat(got);
      if (h.next >= h.total || got.length === 0) return;
    }
  }

  // niceTicks returns about n round values spanning [lo, hi].
  function niceTicks(lo, hi, n) {
    if (!(hi > lo)) { hi = lo + 1; }
    const raw = (hi - lo) / n;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
    const ticks = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
    return { ticks: ticks, lo: Math.min(lo, ticks[0]), hi: Math.max(hi, ticks[ticks.length - 1]) };
  }

  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // chart draws ys against xs into svg: axes, grid, one line.
  function chart(svg, xy, o) {
    const W = 560, H = 240, L = 56, R = 26, T = 10, B = 30;
    const nodes = [];
    svg.dataset.n = String(xy.length);
    if (xy.length < 2) {
      nodes.push(svgEl('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'empty' }, o.empty));
      svg.replaceChildren(...nodes);
      return;
    }
    // At most ~2 points a pixel: a long trial stays cheap to draw.
    const stride = Math.max(1, Math.floor(xy.length / (2 * (W - L - R))));
    const pts = xy.filter((p, i) => i % stride === 0 || i === xy.length - 1);
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const [x, y] of pts) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
    if (o.zero) y0 = Math.min(0, y0);
    const xs = niceTicks(x0, x1, 5), ys = niceTicks(y0, y1, 4);
    const sx = (x) => L + (x - xs.lo) / (xs.hi - xs.lo) * (W - L - R);
    const sy = (y) => H - B - (y - ys.lo) / (ys.hi - ys.lo) * (H - T - B);
    for (const t of ys.ticks) {
      nodes.push(svgEl('line', { x1: L, x2: W - R, y1: sy(t), y2: sy(t), class: 'grid' }));
      nodes.push(svgEl('text', { x: L - 6, y: sy(t) + 4, 'text-anchor': 'end' }, num(t, 1)));
    }
    for (const t of xs.ticks) {
      nodes.push(svgEl('text', { x: sx(t), y: H - B + 16, 'text-anchor': 'middle' }, o.xfmt(t)));
    }
    nodes.push(svgEl('line', { x1: L, x2: W - R, y1: H - B, y2: H - B, class: 'axis' }));
    nodes.push(svgEl('line', { x1: L, x2: L, y1: T, y2: H - B, class: 'axis' }));
    const line = pts.map(([x, y]) => sx(x).toFixed(1) + ',' + sy(y).toFixed(1)).join(' ');
    nodes.push(svgEl('polyline', { points: line, class: 'line', stroke: o.color }));
    svg.replaceChildren(...nodes);
  }

  function drawCharts() {
    const ret = points.filter((p) => p.mean_return !== null).map((p) => [p.env_steps, p.mean_return]);
    const rate = points.map((p) => [p.elapsed_s, p.steps_per_s]);
    const lag = points.filter((p) => p.policy_lag !== null).map((p) => [p.elapsed_s, p.policy_lag]);
    chart($('chart-return'), ret, { color: '#2563eb', xfmt: (v) => num(v), empty: 'no episode has ended yet' });
    chart($('chart-rate'), rate, { color: '#15803d', xfmt: dur, zero: true, empty: 'waiting for metrics' });
    chart($('chart-lag'), lag, { color: '#c2410c', xfmt: dur, zero: true, empty: 'no trainer reports a policy lag' });
  }

  // ---- the loops ----
  async function tick() {
    try {
      const [t] = await Promise.all([get('/api/trial'), pollHistory()]);
      renderTrial(t);
      drawCharts();
    } catch (e) {
      const p = $('problem');
      p.hidden = false;
      p.textContent = 'dashboard unreachable: ' + (e.message || e);
    }
    setTimeout(tick, 1000);
  }
  async function logTick() {
    await pollLog();
    setTimeout(logTick, 2000);
  }
  $('log-worker').addEventListener('change', pollLog);
  tick();
  setTimeout(logTick, 2000);
})();
