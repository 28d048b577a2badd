// The beam-search tree of attnmt: the explorer page and notebook outputs paste this same
// file inline; it defines one name, AttnmtTree, in the scope it is pasted into, so two
// trees in one page never share state or ids.
//
//   const tree = AttnmtTree.create({ onContinue, onSelect });  // tree.el: a <div class="attnmt-tree">
//   tree.show(search);    // draw a whole "search" record (replaces what was drawn)
//   tree.add(nodes);      // streaming: append nodes (same shape), drawn at the next frame
//   tree.flush();         // draw what add() brought now
//   tree.finish(search);  // the final record: the same as show(search)
//
// `search` is {beam, alpha, source_pieces, nodes, nbest}; a node is {id, parent, depth,
// token, piece, status (root, forced, kept, pruned, finished, ended), log_prob,
// cum_log_prob, score, best, rank, rejected: [[piece, log_prob]...], attention}: the
// SearchRecord and SearchNode defined once in src/attnmt/decoding/records.py
// (tests/test_records.py keeps this list equal to them).
// onContinue(node, path) gets the nodes from depth 1 to `node`; onSelect(node) the node
// clicked (null when let go). Plain DOM and SVG, no library, no network; text is always
// set as text, never as HTML.
const AttnmtTree = (() => {
  'use strict';
  const SVG = 'http://www.w3.org/2000/svg';
  // Build an element; strings among the children become text nodes (never HTML).
  function make(e, attrs, kids) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v == null || v === false) continue;
      if (k === 'class') e.setAttribute('class', v);
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const kid of kids) if (kid != null) e.append(kid);
    return e;
  }
  const el = (tag, attrs = {}, ...kids) => make(document.createElement(tag), attrs, kids);
  const svg = (tag, attrs = {}, ...kids) => make(document.createElementNS(SVG, tag), attrs, kids);

  // Geometry: a column per depth, a row slot per node.
  const COL = 112, ROW = 30, NODE_W = 84, NODE_H = 20, PAD = 12;

  // Attention weights as heatmap.js shades them (scale "weights").
  const gamma = (w) => Math.sqrt(Math.min(1, Math.max(0, Number(w) || 0)));
  const blue = (a) => `rgba(30, 60, 160, ${a.toFixed(3)})`;
  // A token's probability: one hue, pale (unlikely) to dark (certain).
  const lightness = (p) => 96 - 58 * Math.min(1, Math.max(0, p));
  const probColour = (p) => `hsl(218, 62%, ${lightness(p).toFixed(1)}%)`;
  const prob = (n) => (n && n.log_prob != null ? Math.exp(Number(n.log_prob)) : 1);
  const pct = (p) => `${(100 * p).toFixed(p < 0.001 ? 3 : 1)}%`;
  const num = (x, d = 3) => (x == null || Number.isNaN(Number(x)) ? '–' : Number(x).toFixed(d));
  // A piece as read: the word marker "▁" becomes a space.
  const spaced = (piece) => String(piece == null ? '' : piece).replace(/▁/g, ' ');
  function label(piece) {
    const t = spaced(piece).trim() || (String(piece || '').includes('▁') ? '␣' : '');
    return t.length > 10 ? `${t.slice(0, 9)}…` : t;
  }
  const EOS = '<' + '/s>';

  function legend() {
    const steps = [0, 0.25, 0.5, 0.75, 1];
    return el('span', { class: 'tree-legend' },
      'p 0', el('span', { class: 'tree-ramp', style: `background: linear-gradient(to right, ${steps.map((p) => `${probColour(p)} ${p * 100}%`).join(', ')})` }), '100%',
      el('span', { class: 'tree-key key-best', text: 'chosen' }),
      el('span', { class: 'tree-key key-forced', text: 'prefix' }),
      el('span', { class: 'tree-key key-finished', text: 'finished' }),
      el('span', { class: 'tree-key key-pruned', text: 'pruned' }));
  }

  function create(options = {}) {
    const pruneBox = el('input', { type: 'checkbox', class: 'show-pruned', checked: true });
    const canvas = svg('svg', { class: 'canvas', role: 'img', 'aria-label': 'beam search tree' });
    const box = el('div', { class: 'tree-box' }, canvas);
    const details = el('div', { class: 'details', 'aria-live': 'polite' });
    const nbest = el('div', { class: 'nbest' });
    const root = el('div', { class: 'attnmt-tree', tabindex: -1 },
      el('div', { class: 'tree-controls' }, el('label', {}, pruneBox, ' show pruned'), legend()),
      box, details, nbest);
    const t = {
      el: root, search: null, nodes: [], byId: new Map(), at: new Map(), nodeEls: new Map(), edgeEls: new Map(),
      pinned: null, shown: null, lit: [], pos: new Map(),
    };

    // The nodes from depth 1 to `node` (the root left out).
    function pathTo(node) {
      const path = [];
      const seen = new Set();
      for (let n = node; n && !seen.has(n.id); n = t.byId.get(n.parent)) {
        seen.add(n.id);
        if (n.parent == null || n.status === 'root') break;
        path.unshift(n);
      }
      return path;
    }
    const pathText = (node) => pathTo(node).map((n) => n.piece).filter((p) => p !== EOS).map(spaced).join('').trim();

    // Columns by depth; in a column, by the parent's place, then the best first. Each
    // node sits as near its parent's row as the nodes above it allow.
    function layout(nodes) {
      const pos = new Map();
      const cols = new Map();
      for (const n of nodes) {
        const d = Number(n.depth) || 0;
        if (!cols.has(d)) cols.set(d, []);
        cols.get(d).push(n);
      }
      let bottom = 0;
      for (const d of [...cols.keys()].sort((a, b) => a - b)) {
        const col = cols.get(d);
        const py = (n) => (pos.has(n.parent) ? pos.get(n.parent).y : Infinity);
        col.sort((a, b) => py(a) - py(b) || (Number(b.cum_log_prob) || 0) - (Number(a.cum_log_prob) || 0));
        const siblings = new Map();
        for (const n of col) siblings.set(n.parent, (siblings.get(n.parent) || 0) + 1);
        const seen = new Map();
        let prev = -Infinity;
        for (const n of col) {
          const k = seen.get(n.parent) || 0;
          seen.set(n.parent, k + 1);
          const want = pos.has(n.parent) ? pos.get(n.parent).y + (k - (siblings.get(n.parent) - 1) / 2) * ROW : 0;
          const y = Math.max(0, want, prev + ROW);
          pos.set(n.id, { x: d * COL, y });
          prev = y;
          bottom = Math.max(bottom, y);
        }
      }
      return { pos, width: (Math.max(0, ...cols.keys()) + 1) * COL, height: bottom + ROW };
    }

    function visible() {
      const all = t.nodes;
      if (pruneBox.checked) return all;
      const keep = new Set();
      const out = [];
      for (const n of all) {
        if (n.status === 'pruned') continue;
        if (n.parent != null && t.byId.has(n.parent) && !keep.has(n.parent)) continue;
        keep.add(n.id);
        out.push(n);
      }
      return out;
    }

    function render() {
      unlight();
      const nodes = visible();
      const { pos, width, height } = layout(nodes);
      canvas.setAttribute('width', width + 2 * PAD);
      canvas.setAttribute('height', height + 2 * PAD);
      const edges = svg('g', { class: 'edges', transform: `translate(${PAD}, ${PAD})` });
      const layer = svg('g', { class: 'nodes', transform: `translate(${PAD}, ${PAD})` });
      t.nodeEls = new Map();
      t.edgeEls = new Map();
      for (const n of nodes) {
        const p = pos.get(n.id);
        const status = String(n.status || 'kept');
        const best = n.best === true;
        if (pos.has(n.parent)) {
          const q = pos.get(n.parent);
          const x0 = q.x + NODE_W, y0 = q.y + NODE_H / 2, x1 = p.x, y1 = p.y + NODE_H / 2, mx = (x0 + x1) / 2;
          const edge = svg('path', {
            class: `edge${best ? ' best' : ''}${status === 'pruned' ? ' pruned' : ''}`,
            d: `M${x0},${y0} C${mx},${y0} ${mx},${y1} ${x1},${y1}`, 'data-from': n.parent, 'data-to': n.id,
          });
          edges.append(edge);
          t.edgeEls.set(n.id, edge);
        }
        const fill = status === 'root' ? '#ffffff' : probColour(prob(n));
        const dark = status !== 'root' && lightness(prob(n)) < 62;
        const g = svg('g', {
          class: `node status-${status}${best ? ' best' : ''}`, transform: `translate(${p.x}, ${p.y})`,
          tabindex: 0, 'data-id': n.id, 'data-status': status, 'data-best': best ? 'true' : 'false',
          'data-rank': n.rank != null ? n.rank : null,
        });
        if (status === 'finished') g.append(svg('rect', { class: 'outer', x: -3, y: -3, width: NODE_W + 6, height: NODE_H + 6, rx: 6 }));
        g.append(
          svg('rect', { class: 'box', width: NODE_W, height: NODE_H, rx: 4, style: `fill: ${fill}` }),
          svg('text', { class: dark ? 'label dark' : 'label', x: NODE_W / 2, y: NODE_H / 2, text: label(n.piece) }));
        if (status === 'finished' && n.rank != null) {
          g.append(svg('text', { class: 'rank', x: NODE_W + 6, y: NODE_H / 2, text: `#${Number(n.rank) + 1}` }));
        }
        layer.append(g);
        t.nodeEls.set(n.id, g);
      }
      canvas.replaceChildren(edges, layer);
      if (t.pinned != null && !t.nodeEls.has(t.pinned)) t.pinned = null;
      if (t.pinned != null) t.nodeEls.get(t.pinned).classList.add('selected');
      root.classList.toggle('pinned', t.pinned != null);
      renderNbest();
      t.pos = pos;
      t.shown = undefined;
      describe(t.pinned != null ? t.byId.get(t.pinned) : null);
    }

    function renderNbest() {
      const ids = (t.search && Array.isArray(t.search.nbest) ? t.search.nbest : []).filter((id) => t.byId.has(id));
      if (!ids.length) { nbest.replaceChildren(); return; }
      nbest.replaceChildren(
        el('div', { class: 'nbest-title', text: 'n-best' }),
        ...ids.map((id, i) => {
          const n = t.byId.get(id);
          return el('div', { class: n.best ? 'nbest-row best' : 'nbest-row', 'data-id': id, tabindex: 0 },
            el('span', { class: 'nbest-rank', text: String((n.rank != null ? Number(n.rank) : i) + 1) }),
            el('span', { class: 'nbest-text', dir: 'auto', text: pathText(n) }),
            el('span', { class: 'nbest-score', text: num(n.score) }));
        }));
    }

    // The details box: a node's numbers, its rejected candidates, its attention row.
    // (Drawn again only when it changes: a button under the pointer must stay the same.)
    function describe(n) {
      const key = n ? `${n.id}:${t.pinned === n.id}` : null;
      if (key === t.shown) return;
      t.shown = key;
      if (!n) { details.replaceChildren(); delete details.dataset.id; return; }
      details.dataset.id = String(n.id);
      const p = prob(n);
      const rows = [
        ['p', n.log_prob != null ? pct(p) : '–'], ['cumulative log-prob', num(n.cum_log_prob)],
        ['normalised score', num(n.score)], ['status', String(n.status || '')],
      ];
      if (n.rank != null) rows.push(['n-best rank', String(Number(n.rank) + 1)]);
      const parts = [
        el('div', { class: 'details-head' }, el('span', { class: 'node-piece', dir: 'auto', text: spaced(n.piece) || '(empty)' }),
          el('span', { class: 'raw', text: `${JSON.stringify(String(n.piece == null ? '' : n.piece))} · depth ${n.depth}` })),
        el('dl', { class: 'facts' }, ...rows.flatMap(([k, v]) => [el('dt', { text: k }), el('dd', { text: v })])),
      ];
      const rejected = Array.isArray(n.rejected) ? n.rejected : [];
      if (rejected.length) {
        parts.push(el('div', { class: 'rejected' }, el('span', { class: 'what', text: 'not kept after it:' }),
          ...rejected.map(([piece, lp]) => el('span', { class: 'cand', 'data-piece': piece, text: `${spaced(piece).trim() || piece} ${pct(Math.exp(Number(lp)))}` }))));
      }
      const src = (t.search && t.search.source_pieces) || [];
      if (Array.isArray(n.attention)) {
        const cells = n.attention.map((w, i) => {
          const a = gamma(w);
          return el('span', {
            class: 'attn-cell', 'data-index': i, 'data-weight': String(w), title: `${num(w)}`,
            style: `background-color: ${blue(a)}; color: ${a > 0.55 ? '#fff' : 'inherit'}`,
            text: src[i] != null ? src[i] : '',
          });
        });
        parts.push(el('div', { class: 'node-attention' }, el('span', { class: 'what', text: 'attention over the source:' }),
          el('div', { class: 'attn-row', dir: 'ltr' }, ...cells)));
      }
      if (t.pinned === n.id && n.parent != null && n.status !== 'root') {
        const go = el('button', { type: 'button', class: 'continue', text: 'Continue from here' });
        go.addEventListener('click', () => continueFrom(n));
        parts.push(go);
      }
      details.replaceChildren(...parts);
    }

    function continueFrom(n) {
      if (n && options.onContinue) options.onContinue(n, pathTo(n));
    }

    // Light a hypothesis' path (n-best hover).
    function light(id) {
      unlight();
      for (const n of [t.byId.get(0), ...pathTo(t.byId.get(id))]) {
        if (!n) continue;
        for (const e of [t.nodeEls.get(n.id), t.edgeEls.get(n.id)]) if (e) { e.classList.add('path-hl'); t.lit.push(e); }
      }
      root.classList.toggle('lighting', t.lit.length > 0);
    }
    function unlight() {
      for (const e of t.lit) e.classList.remove('path-hl');
      t.lit = [];
      root.classList.remove('lighting');
    }

    function pin(id) {
      if (t.pinned != null && t.nodeEls.has(t.pinned)) t.nodeEls.get(t.pinned).classList.remove('selected');
      t.pinned = id;
      if (id != null && t.nodeEls.has(id)) t.nodeEls.get(id).classList.add('selected');
      root.classList.toggle('pinned', id != null);
      describe(id != null ? t.byId.get(id) : null);
      if (options.onSelect) options.onSelect(id != null ? t.byId.get(id) : null);
    }
    const restore = () => describe(t.pinned != null ? t.byId.get(t.pinned) : null);

    const nodeOf = (e) => {
      const g = e.target.closest && e.target.closest('.node');
      return g && canvas.contains(g) ? t.byId.get(Number(g.getAttribute('data-id'))) : null;
    };
    const rowOf = (e) => {
      const r = e.target.closest && e.target.closest('.nbest-row');
      return r && nbest.contains(r) ? Number(r.getAttribute('data-id')) : null;
    };
    canvas.addEventListener('mouseover', (e) => { const n = nodeOf(e); if (n) describe(n); });
    canvas.addEventListener('focusin', (e) => { const n = nodeOf(e); if (n) describe(n); });
    canvas.addEventListener('mouseout', (e) => {
      if (nodeOf(e) && !(e.relatedTarget && e.relatedTarget.closest && e.relatedTarget.closest('.node'))) restore();
    });
    canvas.addEventListener('focusout', restore);
    box.addEventListener('click', (e) => {
      const n = nodeOf(e);
      if (n) pin(n.id);
      else if (t.pinned != null) pin(null);  // the empty background lets go
    });
    canvas.addEventListener('dblclick', (e) => { const n = nodeOf(e); if (n && n.status !== 'root') continueFrom(n); });
    nbest.addEventListener('mouseover', (e) => { const id = rowOf(e); if (id != null) light(id); });
    nbest.addEventListener('focusin', (e) => { const id = rowOf(e); if (id != null) light(id); });
    nbest.addEventListener('mouseleave', unlight);
    nbest.addEventListener('focusout', unlight);
    nbest.addEventListener('click', (e) => { const id = rowOf(e); if (id != null && t.nodeEls.has(id)) pin(id); });
    root.addEventListener('keydown', (e) => {
      if (e.key === 'Escape' && t.pinned != null) { pin(null); return; }
      if (e.key === 'Enter') {
        const n = nodeOf(e);
        if (n) { e.preventDefault(); pin(n.id); }
      }
    });
    pruneBox.addEventListener('change', render);

    // Nodes by id, and where each sits in t.nodes (a node sent again replaces itself).
    function index(nodes) {
      for (const n of nodes || []) {
        if (!n || n.id == null) continue;
        if (t.byId.has(n.id)) t.nodes[t.at.get(n.id)] = n;
        else { t.at.set(n.id, t.nodes.length); t.nodes.push(n); }
        t.byId.set(n.id, n);
      }
    }

    // Streaming brings a step every few milliseconds and a long beam search thousands of
    // nodes: add() draws at most once per animation frame (each drawing is the whole tree),
    // so the page keeps up with the server; show() and flush() draw at once.
    let pending = 0;
    function drawAdded() {
      pending = 0;
      render();
      // Bring the newest column into view.
      box.scrollLeft = box.scrollWidth;
      const deepest = Math.max(0, ...t.nodes.map((n) => Number(n.depth) || 0));
      const newest = t.nodes.filter((n) => (Number(n.depth) || 0) === deepest && t.nodeEls.has(n.id));
      if (newest.length) {
        const y = t.pos.get(newest[0].id).y + PAD;
        if (y < box.scrollTop || y + NODE_H > box.scrollTop + box.clientHeight) box.scrollTop = Math.max(0, y - ROW);
      }
    }
    function cancelPending() { if (pending) { cancelAnimationFrame(pending); pending = 0; } }

    t.show = (search) => {
      cancelPending();
      t.search = search || {};
      t.nodes = [];
      t.byId = new Map();
      t.at = new Map();
      t.pinned = null;
      index(Array.isArray(t.search.nodes) ? t.search.nodes : []);
      render();
    };
    t.add = (nodes) => {
      if (!t.search) t.search = { nodes: [] };
      index(Array.isArray(nodes) ? nodes : [nodes]);
      if (!pending) pending = requestAnimationFrame(drawAdded);
    };
    t.flush = () => { if (pending) { cancelPending(); drawAdded(); } };
    t.finish = (search) => t.show(search);
    t.path = (id) => pathTo(t.byId.get(id));
    return t;
  }

  return { create, el, svg, gamma, blue, probColour };
})();
