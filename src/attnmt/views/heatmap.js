// The attention heatmap of attnmt: one component, two homes. The explorer page
// (attnmt serve) and every notebook output (attnmt.views) include this same file; it
// defines one name, AttnmtHeatmap, in the scope it is pasted into (the page's or the
// output's own function), so two outputs in one notebook never share state or ids.
//
//   const view = AttnmtHeatmap.create({ onSelect });  // view.el: a <div class="viz">
//   view.show(record);                                  // a translation as the API gives it
//
// `record` is a line of POST /api/translate with "weights": true, the sentence record
// defined once in src/attnmt/decoding/records.py (SentenceRecord): source_words,
// target_words, source_pieces, target_pieces, attention (a list of maps {name, method,
// scale, layer, head, word, subword, alignment}: AttentionMap), default_attention and
// explanation ({method, scale, ...}). Plain DOM, no library, no network; text is always
// set as text, never as HTML.
const AttnmtHeatmap = (() => {
  'use strict';
  // Build an element; strings among the children become text nodes (never HTML).
  function el(tag, attrs = {}, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const kid of kids) if (kid != null) e.append(kid);
    return e;
  }

  // A value's colour and strength: attention on its fixed 0..1 scale ("weights"); an
  // explanation's relative to `top`, its row's largest magnitude ("row"), and when signed
  // positive red, negative blue (as `attnmt plot` draws them: attnmt.plotting.SCALES).
  // attnmt/views/html.py draws the static picture with the same formulas.
  const gamma = (w) => Math.sqrt(Math.min(1, Math.max(0, Number(w) || 0)));  // small weights stay visible
  const blue = (a) => `rgba(30, 60, 160, ${a.toFixed(3)})`;
  const red = (a) => `rgba(190, 30, 45, ${a.toFixed(3)})`;
  function shade(scale, value, top) {
    const w = Number(value) || 0;
    if (scale === 'weights' || !scale) { const a = gamma(w); return [blue(a), a]; }
    const a = gamma(Math.abs(w) / (top || 1));
    return [scale === 'signed' && w > 0 ? red(a) : blue(a), a];
  }
  const magnitude = (values) => Math.max(0, ...values.map((v) => Math.abs(Number(v) || 0)));

  function legend(scale = 'weights') {
    const steps = [0, 0.05, 0.15, 0.3, 0.5, 0.75, 1];
    const ramp = (colour, flip) => el('span', { class: 'ramp', style: `background: linear-gradient(to ${flip ? 'left' : 'right'}, ${
      steps.map((w) => `${colour(gamma(w))} ${w * 100}%`).join(', ')})` });
    const link = [el('span', { class: scale === 'signed' ? 'swatch dark' : 'swatch' }), 'alignment link'];
    if (scale === 'signed') {
      return el('span', { class: 'legend', 'data-scale': scale, title: 'each row scaled to its largest magnitude' },
        'negative', ramp(blue, true), '0', ramp(red, false), 'positive, per row', ...link);
    }
    if (scale === 'row') {
      return el('span', { class: 'legend', 'data-scale': scale, title: 'each row scaled to its largest value' },
        '0', ramp(blue, false), 'the row\'s largest', ...link);
    }
    return el('span', { class: 'legend', 'data-scale': 'weights' }, 'weight 0', ramp(blue, false), '1', ...link);
  }

  // Pharaoh "i-j" → a set of "row,col" keys (row = target word j, column = source word i).
  function linkSet(pharaoh) {
    const set = new Set();
    for (const pair of String(pharaoh || '').trim().split(/\s+/)) {
      const m = /^(\d+)-(\d+)$/.exec(pair);
      if (m) set.add(`${m[2]},${m[1]}`);
    }
    return set;
  }

  function copyFallback(text) {
    const ta = el('textarea', { readonly: true, style: 'position: fixed; left: -9999px; top: 0; opacity: 0' });
    ta.value = text;
    document.body.append(ta);
    ta.select();
    let ok = false;
    try { ok = document.execCommand('copy'); } catch { ok = false; }
    ta.remove();
    return ok;
  }

  const mapMethod = (m) => (m && m.method) || '';
  // The record's first explanation (`explanations`; an image reading's `explanation`).
  const explained = (r) => (r ? (r.explanations && r.explanations[0]) || r.explanation || null : null);
  // A map's scale: its own, else the record's explanation's, else attention weights.
  const scaleOf = (r, map) => (map && map.scale) || (explained(r) ? explained(r).scale : '') || 'weights';

  // One heatmap view: level (word/subword), method and map selectors, a legend, the two
  // token lines, the table and the word alignment. Hover or focus lights a row and/or a
  // column; a click pins it (click again, or Escape, to let go).
  function create(options = {}) {
    const levelSel = el('select', { class: 'level', 'aria-label': 'Level' },
      el('option', { value: 'word', text: 'word' }), el('option', { value: 'subword', text: 'subword' }));
    const methodSel = el('select', { class: 'map-method', 'aria-label': 'Method' });
    const mapSel = el('select', { class: 'map', 'aria-label': 'Attention map' });
    const root = el('div', { class: 'viz' },
      el('div', { class: 'controls' },
        el('label', {}, 'Level ', levelSel),
        el('label', { class: 'method-wrap', hidden: true }, 'Method ', methodSel),
        el('label', { class: 'map-wrap', hidden: true }, 'Attention map ', mapSel),
        legend()),
      el('div', { class: 'token-row' }, el('span', { class: 'line-label', text: 'source' }), el('div', { class: 'src-line', dir: 'auto' })),
      el('div', { class: 'token-row' }, el('span', { class: 'line-label', text: 'target' }), el('div', { class: 'tgt-line', dir: 'auto' })),
      el('div', { class: 'heatmap' }),
      el('div', { class: 'readout', 'aria-live': 'polite' }),
      el('div', { class: 'alignment-box' },
        el('span', { class: 'alignment-label', text: 'word alignment (Pharaoh i-j: source word i, target word j)' }),
        el('code', { class: 'alignment', dir: 'ltr' }),
        el('button', { type: 'button', class: 'secondary copy-alignment', text: 'Copy alignment' }),
        el('span', { class: 'copied', 'aria-live': 'polite' })));
    const q = (sel) => root.querySelector(sel);
    const v = {
      el: root, record: null, level: options.level || 'word', map: 0, pinned: null,
      mat: [], scale: 'weights', tops: [], table: null,
      srcEls: [], tgtEls: [], rowCells: [], colCells: [], lit: [], tinted: [], copyTimer: null,
    };

    function maps() { return v.record && Array.isArray(v.record.attention) ? v.record.attention : []; }

    // The method selector lists the methods among the maps (hidden when there is one);
    // the map selector the maps of the chosen method (hidden when there is one).
    function fillSelectors() {
      const all = maps();
      const methods = [...new Set(all.map(mapMethod))];
      const current = mapMethod(all[v.map]);
      methodSel.replaceChildren(...methods.map((m) => el('option', { value: m, text: m || 'attention' })));
      methodSel.value = current;
      q('.method-wrap').hidden = methods.length < 2;
      const mine = all.map((m, i) => [m, i]).filter(([m]) => mapMethod(m) === current);
      mapSel.replaceChildren(...mine.map(([m, i]) => el('option', { value: i, text: m.name })));
      mapSel.value = String(v.map);
      q('.map-wrap').hidden = mine.length < 2;
      levelSel.value = v.level;
    }

    function render() {
      clearHighlight();
      const r = v.record;
      const map = maps()[v.map] || null;
      const word = v.level === 'word';
      const src = (word ? r.source_words : r.source_pieces) || [];
      const tgt = (word ? r.target_words : r.target_pieces) || [];
      const mat = map ? (word ? map.word : map.subword) || [] : [];
      const links = word && map ? linkSet(map.alignment) : new Set();
      const scale = scaleOf(r, map), tops = mat.map(magnitude);
      q('.legend').replaceWith(legend(scale));
      Object.assign(v, { mat, scale, tops, srcEls: [], tgtEls: [], rowCells: [], colCells: [], table: null });
      const add = (arr, i, e) => { (arr[i] = arr[i] || []).push(e); return e; };

      // Token chips (their own line direction, so Arabic reads right to left).
      q('.src-line').replaceChildren(...src.map((t, i) => add(v.srcEls, i, el('span', { class: 'src-token', 'data-index': i, tabindex: 0, text: t }))));
      q('.tgt-line').replaceChildren(...tgt.map((t, j) => add(v.tgtEls, j, el('span', { class: 'tgt-token', 'data-index': j, tabindex: 0, text: t }))));

      const alignment = map ? map.alignment : r.alignment;
      q('.alignment').textContent = alignment || '(no links)';
      q('.copy-alignment').disabled = !alignment;

      const box = q('.heatmap');
      box.dataset.level = v.level;
      box.dataset.map = String(v.map);
      box.dataset.method = mapMethod(map) || (explained(r) ? explained(r).method : '');
      if (!map) { box.replaceChildren(el('p', { class: 'hint', text: 'There are no attention weights for this sentence.' })); return; }
      if (!mat.length) { box.replaceChildren(el('p', { class: 'hint', text: 'The translation has no words: the subword level shows the </s> step the model took.' })); return; }
      // The grid keeps data order left to right, whatever the script.
      const cols = Math.max(src.length, ...mat.map((row) => row.length));
      const head = el('tr', {}, el('th', { class: 'corner', scope: 'col' }));
      for (let i = 0; i < cols; i++) {
        const t = src[i] != null ? src[i] : '';
        head.append(add(v.srcEls, i, el('th', { class: 'src-label', scope: 'col', 'data-index': i, title: t }, el('span', { dir: 'auto', text: t }))));
      }
      const body = el('tbody');
      mat.forEach((row, j) => {
        const t = tgt[j] != null ? tgt[j] : '';
        const tr = el('tr', {}, add(v.tgtEls, j, el('th', { class: 'tgt-label', scope: 'row', 'data-index': j, title: t }, el('span', { dir: 'auto', text: t }))));
        for (let i = 0; i < cols; i++) {
          const w = Number(row[i]) || 0;
          const cell = el('td', {
            class: links.has(`${j},${i}`) ? 'cell link' : 'cell', 'data-row': j, 'data-col': i,
            title: `${w.toFixed(3)}: ${t} ← ${src[i] != null ? src[i] : ''}`, style: `background-color: ${shade(scale, w, tops[j])[0]}`,
          });
          add(v.rowCells, j, cell); add(v.colCells, i, cell);
          tr.append(cell);
        }
        body.append(tr);
      });
      const table = el('table', { dir: 'ltr', class: `${v.level} ${scale}` }, el('thead', {}, head), body);
      const what = map.method && map.method !== 'attention' ? `${map.method} values` : 'attention weights';
      table.setAttribute('aria-label', `${what}, ${v.level} level: rows are target tokens, columns source tokens`);
      box.replaceChildren(table);
      v.table = table;
    }

    // Colour one side by a row's (or a column's) weights; mark the pointed-at token.
    function tint(e, [colour, a]) {
      e.classList.add('hl');
      e.style.backgroundColor = colour;
      e.style.color = a > 0.55 ? '#fff' : '';
      v.tinted.push(e);
    }
    function mark(list, cls) { (list || []).forEach((e) => { e.classList.add(cls); v.lit.push(e); }); }
    function readout(row, col) {
      const out = q('.readout');
      if (!out) return;
      if (!v.record || (row == null && col == null)) { out.textContent = ''; return; }
      const word = v.level === 'word', r = v.record;
      const src = (word ? r.source_words : r.source_pieces) || [];
      const tgt = (word ? r.target_words : r.target_pieces) || [];
      if (row != null && col != null && v.mat[row]) {
        const w = Number(v.mat[row][col]) || 0;
        out.textContent = `${tgt[row] != null ? tgt[row] : ''} ← ${src[col] != null ? src[col] : ''}: ${w.toFixed(3)}`;
      } else if (row != null) out.textContent = `target ${tgt[row] != null ? tgt[row] : ''}: its row`;
      else if (col != null) out.textContent = `source ${src[col] != null ? src[col] : ''}: its column`;
      else out.textContent = '';
    }

    function highlight(row, col) {
      clearHighlight();
      const mat = v.mat || [];
      if (row != null && mat[row]) {
        mark(v.tgtEls[row], 'active');
        mark(v.rowCells[row], 'hl-cell');
        mat[row].forEach((w, i) => (v.srcEls[i] || []).forEach((e) => tint(e, shade(v.scale, w, v.tops[row]))));
      }
      if (col != null) {
        const vals = mat.map((r) => Number(r[col]) || 0);
        const top = magnitude(vals) || 1;  // column max, so a faint column still shows
        mark(v.srcEls[col], 'active');
        mark(v.colCells[col], 'hl-cell');
        const colour = (w) => (v.scale === 'weights' ? [blue(w / top), w / top] : shade(v.scale, w, top));
        vals.forEach((w, j) => (v.tgtEls[j] || []).forEach((e) => tint(e, colour(w))));
      }
      if (v.table && (row != null || col != null)) v.table.classList.add('dim');
      readout(row, col);
    }
    function clearHighlight() {
      for (const e of v.lit) e.classList.remove('active', 'hl-cell');
      for (const e of v.tinted) { e.classList.remove('hl'); e.style.backgroundColor = ''; e.style.color = ''; }
      v.lit = []; v.tinted = [];
      if (v.table) v.table.classList.remove('dim');
      readout(null, null);
    }
    const restore = () => (v.pinned ? highlight(...v.pinned) : clearHighlight());

    async function copyAlignment() {
      const text = q('.alignment').textContent;
      let ok = false;
      if (navigator.clipboard && window.isSecureContext) {
        try { await navigator.clipboard.writeText(text); ok = true; } catch { ok = false; }
      }
      if (!ok) ok = copyFallback(text);
      const note = q('.copied');
      note.textContent = ok ? 'copied' : 'could not copy: select the text instead';
      clearTimeout(v.copyTimer);
      v.copyTimer = setTimeout(() => { note.textContent = ''; }, 1500);
    }

    // What a pointer or focus is on: [row, col] (either may be null), or null.
    function target(e) {
      const t = e.target.closest('.cell, .src-token, .tgt-token, .src-label, .tgt-label');
      if (!t || !root.contains(t)) return null;
      if (t.classList.contains('cell')) return [+t.dataset.row, +t.dataset.col];
      if (t.matches('.tgt-token, .tgt-label')) return [+t.dataset.index, null];
      return [null, +t.dataset.index];
    }
    const onPoint = (e) => { const at = target(e); if (at) highlight(...at); else restore(); };
    root.addEventListener('mouseover', onPoint);
    root.addEventListener('focusin', onPoint);
    root.addEventListener('mouseleave', restore);
    root.addEventListener('focusout', restore);
    root.addEventListener('click', (e) => {
      const at = target(e);
      if (!at) return;
      const same = v.pinned && v.pinned[0] === at[0] && v.pinned[1] === at[1];
      v.pinned = same ? null : at;
      root.classList.toggle('pinned', !!v.pinned);
      restore();
      if (options.onSelect) options.onSelect(v.pinned);
    });
    root.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && v.pinned) { v.pinned = null; root.classList.remove('pinned'); restore(); }
      else if (e.key === 'Enter' && target(e)) { e.preventDefault(); e.target.click(); }
    });
    levelSel.addEventListener('change', () => { v.level = levelSel.value; v.pinned = null; render(); });
    mapSel.addEventListener('change', () => { v.map = Number(mapSel.value); v.pinned = null; render(); });
    methodSel.addEventListener('change', () => {
      const first = maps().findIndex((m) => mapMethod(m) === methodSel.value);
      v.map = Math.max(0, first); v.pinned = null; fillSelectors(); render();
    });
    q('.copy-alignment').addEventListener('click', copyAlignment);

    // Show a record; `map` (an index into record.attention) defaults to the record's
    // default_attention.
    v.show = (record, map) => {
      v.record = record || {};
      const n = maps().length;
      const want = map != null ? map : v.record.default_attention != null ? v.record.default_attention : 0;
      v.map = Math.min(Math.max(0, Number(want) || 0), Math.max(0, n - 1));
      v.pinned = null;
      root.classList.remove('pinned');
      fillSelectors();
      render();
    };
    v.clear = () => { clearHighlight(); q('.heatmap').replaceChildren(); };
    return v;
  }

  return { create, el, legend, shade, gamma, blue, red, magnitude, linkSet };
})();
