// frontend/assets/fabric.js — the Fabric page's browser side: fetches the shared fabric state
// every tick (or a playback step's) and paints the graph from it; draws the graph; the view
// in the URL, playback, detail-panel selection, job highlight, search, filters, expansion.

/* dash-cytoscape always hands Cytoscape.js its default wheel sensitivity (1), and
 * Cytoscape.js warns whenever one is given ("You have set a custom wheel sensitivity"),
 * though the graph zooms as by default: that one line is left out of the console; every
 * other warning still reaches it. */
(function () {
  const warn = console.warn.bind(console);
  console.warn = function (first, ...rest) {
    if (typeof first === "string" && first.startsWith("You have set a custom wheel sensitivity")) {
      return;
    }
    warn(first, ...rest);
  };
})();

/*
 * Dash clientside callbacks (`window.dash_clientside.fabric`), registered by
 * frontend/pages/fabric.py. The server computes the fabric state once per sweep for every
 * viewer (GET /api/fabric/state, answered 304 while unchanged); this file turns it into
 * colours, widths and classes directly on the cytoscape instance (one batch, no element
 * list sent back and forth), so a tick costs the server one cached answer per viewer.
 *
 * Opened on /fabric, this script asks for the live state and the graph as soon as it runs,
 * while Dash is still loading its bundles, layout and callbacks: the first tick and the
 * first draw then take those answers (once each) instead of asking only then.
 *
 * The last ticks' timings (fetch start to painted, in ms) are kept in
 * `window.stacklensFabricTicks` (at most 50) for the benchmark and the browser tests.
 *
 * An edge stands for the link ids in its `data.links` (one link, or a folded leaf's host
 * links): it takes the hottest one's utilisation, the sum of their errors, the union of
 * their flags (FabricState.links.flags: 1 down, 2 saturated, 4 errors unknown) and the
 * highest PortXmitWait rate; from config.congested ticks/s (the incident detector's
 * threshold) it is congested: class `congested`, a halo around its utilisation colour, so
 * a link whose senders wait at low utilisation stands out, live and in playback.
 */
(function () {
    const FLAG_DOWN = 1, FLAG_SATURATED = 2;
    let fetchedAt = null, focused = null, pending = null;
    // The newest state fetched (Dash holds the painter back until a draw in flight ends:
    // the draw paints from it), and what the graph on screen is painted from (`paintKey`;
    // null: nothing yet).
    let heldState = null, painted = null;
    // The graph on screen: its topology's ETag and the expanded leaves (sorted, joined).
    let drawn = null;
    // The freshness of the newest state fetched.
    let lastFreshness = null;
    // Component ids the callbacks tell apart (frontend/ids.py).
    const IDS = {slider: 'fabric-playback.',
                 job: 'fabric-job.', selected: 'fabric-selected.', live: 'fabric-live.',
                 play: 'fabric-play.', close: 'fabric-panel-close.'};

    // The first time the page reached a stage (state fetched, graph fetched, painted), as a
    // performance mark (ms since navigation) for the benchmark.
    const mark = (name) => {
        if (performance.getEntriesByName(name).length === 0) performance.mark(name);
    };

    const utc = (s) => new Date(s * 1000).toISOString().slice(0, 19).replace('T', ' ');

    // Epoch seconds of a window bound as the API reads it (epoch seconds or RFC 3339).
    function seconds(text) {
        if (text === null || text === undefined || text === '') return null;
        if (/^-?[0-9.]+$/.test(text)) return parseFloat(text);
        const t = Date.parse(text);
        return isNaN(t) ? NaN : t / 1000;
    }

    // [from, to] in epoch seconds of a view's window (a live one ends now); [null, null]
    // if unreadable. As the API: no `to` = now, no `from` = 15 minutes before `to`.
    function bounds(view, config) {
        const now = Math.round(Date.now() / 1000);
        if (view.live) return [now - config.live[view.live], now];
        const hi = seconds(view.to) === null ? now : seconds(view.to);
        const lo = seconds(view.from) === null ? hi - 900 : seconds(view.from);
        if (isNaN(lo) || isNaN(hi) || hi <= lo) return [null, null];
        return [Math.floor(lo), Math.ceil(hi)];
    }

    // How old the last sweep is, said plainly; "STALE" when the server says it is.
    function freshnessLine(f) {
        if (!f) return '';
        if (f.last_sweep_ns === null) return 'STALE: no sweep stored yet';
        const age = Math.max(0, (Date.now() - f.last_sweep_ns / 1e6) / 1000);
        const every = f.sweep_interval_ns ? ` (a sweep every ${(f.sweep_interval_ns / 1e9).toFixed(1)} s)` : '';
        const ago = age < 120 ? `${age.toFixed(1)} s` : age < 7200 ? `${(age / 60).toFixed(0)} min`
            : age < 172800 ? `${(age / 3600).toFixed(0)} h` : `${(age / 86400).toFixed(0)} days`;
        const line = `last sweep ${ago} ago${every}`;
        return f.stale ? `STALE: ${line}: no sweep for over ${(f.stale_after_ns / 1e9).toFixed(0)} s, the graph shows the last data, faded` : line;
    }
    window.stacklensFabricTicks = [];

    // Answers asked for before Dash's first callbacks (module doc), by URL, each taken once.
    // The graph's URL is the page's default one (config.graph_path, nothing expanded): a
    // draw asking another URL does not take it.
    const early = new Map();
    const askEarly = (url, init) => {
        const asked = fetch(url, init);
        asked.catch(() => {});  // a failure is reported where the answer is taken, if it is
        early.set(url, asked);
    };
    if (/\/fabric$/.test(window.location.pathname)) {
        const q = new URLSearchParams(window.location.search);
        if (!q.has('from') && !q.has('to') && !q.has('at')) {  // the live state is shown
            askEarly('/api/fabric/state', {cache: 'no-store'});
        }
        askEarly('/_fabric/graph');
    }
    function ask(url, init) {
        const asked = early.get(url);
        if (asked === undefined) return fetch(url, init);
        early.delete(url);
        return asked;
    }

    // The graph's cytoscape instance; null once the page is left (its element gone, the
    // instance destroyed): an answer that arrives after that draws nothing.
    function cyOf(id) {
        const el = document.getElementById(id);
        const cy = el && el.isConnected && el._cyreg ? el._cyreg.cy : null;
        return cy && !cy.destroyed() ? cy : null;
    }

    function mix(a, b, f) {
        const ch = (c, i) => parseInt(c.slice(1 + 2 * i, 3 + 2 * i), 16);
        let out = '#';
        for (let i = 0; i < 3; i++) {
            const v = Math.round(ch(a, i) + (ch(b, i) - ch(a, i)) * f);
            out += v.toString(16).padStart(2, '0');
        }
        return out;
    }

    // Position 0..1 on the colour scale of a utilisation: log (one step per decade from
    // config.log_min to 100 %) or its quantile among the known utilisations.
    function position(u, scale, config, sorted) {
        if (scale === 'quantile') {
            if (sorted.length < 2) return 1;
            let lo = 0, hi = sorted.length;
            while (lo < hi) { const m = (lo + hi) >> 1; if (sorted[m] < u) lo = m + 1; else hi = m; }
            return lo / (sorted.length - 1);
        }
        if (u <= config.log_min) return 0;
        const span = -Math.log10(config.log_min);
        return Math.min(1, (Math.log10(u) + span) / span);
    }

    function colour(p, config) {
        const s = config.scale, x = Math.min(Math.max(p, 0), 1) * (s.length - 1);
        const i = Math.min(Math.floor(x), s.length - 2);
        return mix(s[i], s[i + 1], x - i);
    }

    // A count per second in words a person reads at a glance: 5,000,000 -> "5.0 M".
    function perSecond(n) {
        if (n >= 1e9) return (n / 1e9).toFixed(1) + ' G';
        if (n >= 1e6) return (n / 1e6).toFixed(1) + ' M';
        if (n >= 1e3) return (n / 1e3).toFixed(1) + ' k';
        return n.toFixed(0);
    }

    function bytes(n) {
        const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
        if (n < 1024) return n.toFixed(0) + ' B';
        let v = n / 1024, u = 0;
        while (Math.round(v * 100) / 100 >= 1024 && u < units.length - 1) { v /= 1024; u++; }
        return v.toFixed(2) + ' ' + units[u];
    }

    const pct = (u) => (u * 100).toFixed(1) + '%';

    function summaryLine(s) {
        const busiest = s.busiest === null ? 'no link load known yet'
            : 'busiest link ' + (s.busiest * 100).toFixed(1) + ' %';
        return `${s.nodes} nodes (${s.switches} switches, ${s.hcas} HCAs, ${s.gone} gone) · ` +
            `${s.links} links (${s.down} down) · ${s.erroring} with errors in the last sweep · ` +
            busiest;
    }

    // The query of a custom window's state over the whole of it (null: a live window, whose
    // state is the newest sweep's).
    function windowFrame(view) {
        if (!view || view.live) return null;
        const q = new URLSearchParams();
        if (view.from) q.set('from', view.from);
        if (view.to) q.set('to', view.to);
        return q.toString() || null;
    }

    // One tick's work (see `tick`): the outputs of the tick callback.
    async function update(view, drawnEtag, have) {
        const nu = window.dash_clientside.no_update;
        const frame = view && view.at !== null && view.at !== undefined
            ? `from=${view.at}&to=${view.at + view.step}` : windowFrame(view);
        // What the state the page holds is over: the note `update` put on it ("from=..&to=..";
        // null: live, with the live answer's ETag beside it). Read from the held state, never
        // from a variable of this script: Dash drops the answer of a tick that a newer one
        // overtook, so a frame fetched is not always a frame held, and a tick that trusted it
        // would keep the overtaken state on screen for good.
        const held = have ? have.pageFrame : undefined;
        if (frame !== null && frame === held) return [nu, nu, nu, nu];
        const started = performance.now();
        let response, state;
        try {
            // Only what this page holds counts as had (the script outlives a page).
            const live = frame === null;
            response = await ask('/api/fabric/state' + (live ? '' : '?' + frame), {
                headers: live && held === null && have.pageEtag
                    ? {'If-None-Match': have.pageEtag} : {},
                cache: 'no-store',
            });
            if (response.ok && response.status !== 304) state = await response.json();
        } catch (err) {
            return [nu, nu, 'fabric state unreachable: ' + err, nu];
        }
        const time = 'updated ' + new Date().toISOString().slice(11, 19) + ' UTC';
        if (response.status === 304) return [nu, nu, time, freshnessLine(lastFreshness)];
        if (!response.ok) {
            return [nu, nu, `GET /api/fabric/state: HTTP ${response.status}`, nu];
        }
        mark('fabric-state');
        if (frame === null) state.pageEtag = response.headers.get('ETag');
        state.pageFrame = frame;
        lastFreshness = state.freshness;
        heldState = state;
        fetchedAt = started;
        const same = state.topology_etag === drawnEtag ||
            (drawn !== null && drawn.etag === state.topology_etag);
        return [state, same ? nu : state.topology_etag, time, freshnessLine(lastFreshness)];
    }

    // How the graph looks in a state, under a filter, a scale and a job highlight: per edge
    // (the link ids it stands for, whether it is a bundle, a fast one, its ends' words) its
    // classes, colour, width and title; per host group its colour, title and error flag
    // (from its bundle's look); whether a node is the job's.
    function painter(state, filter, scale, job, config) {
        const L = state.links, index = new Map();
        // Live data the server calls stale is drawn faded and dashed (the last known).
        const stale = state.from_ns === null && !!state.freshness && state.freshness.stale;
        L.id.forEach((id, i) => index.set(id, i));
        const known = L.utilisation.filter((u) => u !== null).sort((a, b) => a - b);
        const jobLinks = job ? new Set(job.links) : null;
        const jobNodes = job ? new Set(job.nodes) : null;
        const hotFrom = known.length
            ? known[Math.max(0, Math.ceil(known.length * (1 - config.hot_share)) - 1)]
            : Infinity;
        return {
            ofJob: (id) => !!jobNodes && jobNodes.has(id),
            edge: function (links, bundle, fast, ends) {
                let u = null, rate = null, errors = 0, flags = 0, down = 0, n = 0, wait = null;
                let ofJob = false;
                for (const id of links || []) {
                    if (jobLinks && jobLinks.has(id)) ofJob = true;
                    const i = index.get(id);
                    if (i === undefined) continue;
                    n++;
                    const ui = L.utilisation[i];
                    if (ui !== null && (u === null || ui > u)) { u = ui; rate = L.bytes_per_s[i]; }
                    const wi = L.xmit_wait_per_s[i];
                    if (wi !== null && (wait === null || wi > wait)) wait = wi;
                    errors += L.errors[i];
                    flags |= L.flags[i];
                    down += L.flags[i] & FLAG_DOWN ? 1 : 0;
                }
                const allDown = n > 0 && down === n;
                const congested = !allDown && wait !== null && wait >= config.congested;
                const cls = ['link', allDown ? 'down' : 'up'];
                if (bundle) cls.push('bundle');
                if (fast) cls.push('fast');
                if (errors > 0 || flags & FLAG_SATURATED) cls.push('error');
                if (congested) cls.push('congested');
                if (u === null) cls.push('unknown');
                const shown = filter === 'hot' ? u !== null && u >= hotFrom
                    : filter === 'errors' ? errors > 0 || (flags & FLAG_SATURATED) > 0
                    : filter === 'congested' ? congested
                    : filter === 'down' ? down > 0 : true;
                if (ofJob) cls.push('job');
                if (stale) cls.push('stale');
                if (!shown || (jobLinks && !ofJob)) cls.push('dim');
                const c = u === null ? config.unknown : colour(position(u, scale, config, known), config);
                let title = `${ends}: ` + (allDown ? 'down (no rate)'
                    : u === null ? 'load unknown' : `${pct(u)} (${bytes(rate)}/s)`);
                if (wait !== null && wait > 0 && !allDown) {
                    title += `, PortXmitWait ${perSecond(wait)} ticks/s` + (congested ? ' (congested)' : '');
                }
                if (errors) title += `, ${errors} errors`;
                if (flags & FLAG_SATURATED) title += ', error counter saturated';
                if (stale) title += ' (stale)';
                return {classes: cls.join(' '), colour: c, title: title, u: u, errors: errors,
                        flags: flags, congested: congested,
                        width: 2 + 6 * Math.min(Math.max(u || 0, 0), 1)};
            },
            group: (label, k) => ({
                colour: k.colour,
                title: `${label}, hottest link ${k.u === null ? 'unknown' : pct(k.u)}` +
                    (k.congested ? ', a link congested' : '') +
                    (k.errors ? `, ${k.errors} errors` : ''),
                error: k.errors > 0 || (k.flags & FLAG_SATURATED) > 0,
                congested: k.congested,
            }),
        };
    }

    // The graph's elements as received (`draw`), in the look of a paint's inputs (state,
    // filter, scale, job, config), before they are added: cytoscape then styles each
    // element once, and the painter has nothing left to do.
    function prepaint(elements, last) {
        const look = painter(last.state, last.filter, last.scale, last.job, last.config);
        const nodes = new Map();
        for (const el of elements) if (el.data.source === undefined) nodes.set(el.data.id, el);
        for (const el of elements) {
            if (el.data.source === undefined) {
                if (look.ofJob(el.data.id)) el.classes += ' job';
                continue;
            }
            const has = (c) => (' ' + el.classes + ' ').includes(' ' + c + ' ');
            const k = look.edge(el.data.links, has('bundle'), has('fast'), el.data.ends);
            Object.assign(el.data, {colour: k.colour, width: k.width, title: k.title});
            el.classes = k.classes;
            const target = nodes.get(el.data.target);
            if (target && target.data.kind === 'group') {
                const g = look.group(target.data.label, k);
                Object.assign(target.data, {colour: g.colour, title: g.title});
                if (g.error) target.classes += ' error';
                if (g.congested) target.classes += ' congested';
            }
        }
    }

    // What a paint is of: the state and job objects, the filter, the scale and the graph
    // drawn (its topology and expansion).
    const paintKey = (p) => [p.state, p.filter, p.scale, p.job, drawn && drawn.etag, drawn && drawn.exp];
    const sameKey = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

    window.dash_clientside = Object.assign({}, window.dash_clientside, {
        fabric: {
            // Every tick: the shared state if it changed (304 otherwise), the topology's ETag
            // if that changed (the graph is then redrawn), and the status line.
            // Every tick: live, the shared state if it changed (304 otherwise); on a playback
            // step (view.at), the state over that step, fetched once per step. Also the
            // topology's ETag if that changed (the graph is then redrawn), the status line
            // and how old the last sweep is. A tick while the previous one's answer is still
            // awaited answers with that one (a slow answer never piles requests up, and Dash,
            // which drops the result of a callback run that a newer run overtook, still
            // gets it).
            tick: function (_n, view, drawnEtag, have) {
                if (pending === null) {
                    pending = update(view, drawnEtag, have).finally(() => { pending = null; });
                }
                return pending;
            },

            // The view in the controls: the playback step (the slider; none: the window's
            // newest state), the job highlighted and the element in the detail panel, in the
            // window of the URL (the header's time range, frontend/timerange.py); written into
            // the page's URL (replaced, so a reload or a shared link shows it).
            navigate: function (at, job, selected, _live, step, view) {
                const trigger = (window.dash_clientside.callback_context.triggered[0] || {}).prop_id || '';
                const v = Object.assign({}, view);
                if (trigger.startsWith(IDS.live)) {
                    v.at = null;
                    v.step = null;
                } else if (trigger.startsWith(IDS.slider)) {
                    v.at = at === null || at === undefined ? null : at;
                    v.step = v.at === null ? null : step;
                } else if (trigger.startsWith(IDS.job)) {
                    v.job = (job || '').trim();
                } else if (trigger.startsWith(IDS.selected)) {
                    v.focus = !selected ? null
                        : selected.kind === 'link' ? 'link-' + selected.id : selected.id;
                }
                const q = new URLSearchParams();
                if (v.live && v.live !== '5m') q.set('live', v.live);  // 5m: the default
                if (v.from) q.set('from', v.from);
                if (v.to) q.set('to', v.to);
                if (v.at !== null) { q.set('at', String(v.at)); q.set('step', String(v.step)); }
                if (v.job) q.set('job', v.job);
                if (v.focus) q.set('focus', v.focus);
                const search = q.toString();
                window.history.replaceState(window.history.state, '',
                    window.location.pathname + (search ? '?' + search : ''));
                return v;
            },

            // The playback slider over the view's window: one step per sweep interval (the
            // stored resolution) up to config.raw_replay_s, per minute beyond (the rollups);
            // and what the graph shows.
            slider: function (view, state, config) {
                const nu = window.dash_clientside.no_update;
                if (!view) return [nu, nu, nu, nu];
                const [lo, hi] = bounds(view, config);
                if (lo === null) return [nu, nu, nu, 'the window is not readable: ' + view.from + ' – ' + view.to];
                const interval = state && state.freshness && state.freshness.sweep_interval_ns
                    ? Math.max(1, Math.round(state.freshness.sweep_interval_ns / 1e9)) : 1;
                const step = hi - lo <= config.raw_replay_s ? interval : 60;
                const max = Math.max(lo, hi - step);
                const shown = view.at === null || view.at === undefined
                    ? (view.live ? 'graph: the newest sweep (live)'
                        : `graph: the whole window, ${utc(lo)} – ${utc(hi)} UTC`)
                    : `graph: replaying ${utc(view.at)} – ${utc(view.at + view.step)} UTC (${view.step} s step)`;
                return [lo, max, step, shown];
            },

            // Play / pause, back to live, and while playing one step per tick (from the
            // start again after the end).
            playback: function (_n, _play, _live, playing, value, lo, hi, step) {
                const nu = window.dash_clientside.no_update;
                const trigger = (window.dash_clientside.callback_context.triggered[0] || {}).prop_id || '';
                const label = (p) => (p ? '❚❚ pause' : '▶ play');
                if (trigger.startsWith(IDS.live)) return [null, false, label(false)];
                if (trigger.startsWith(IDS.play)) {
                    const now = !playing;
                    return [now && (value === null || value === undefined) ? lo : nu, now, label(now)];
                }
                if (!playing) return [nu, nu, nu];
                const next = value === null || value === undefined || value + step > hi ? lo : value + step;
                return [next, nu, nu];
            },

            // The job box: the GUIDs of the job's HCAs and the ids of its links (the whole
            // job: GET /api/jobs/<job>/placement) for the painter, and a line saying what
            // is highlighted or why nothing is. In the browser: no server callback stands
            // between the page's first state and its first paint.
            placed: async function (job) {
                job = (job || '').trim();
                if (!job) return [null, ''];
                const path = '/api/jobs/' + encodeURIComponent(job) + '/placement';
                let response, body;
                try {
                    response = await fetch(path);
                    body = await response.json();
                } catch (err) {
                    return [null, `stacklens server unreachable: ${path}: ${err}`];
                }
                if (!response.ok) {
                    return [null, `stacklens server error: GET ${path} returned HTTP ` +
                        `${response.status}: ${body.detail}`];
                }
                const nodes = [...new Set(body.hosts.flatMap((h) => h.ports.map((p) => p.guid)))].sort();
                const links = body.links.map((l) => l.id);
                const lost = body.hosts.filter((h) => h.match === 'unmatched').map((h) => h.host);
                let line = `job ${job}: ${body.hosts.length - lost.length} hosts, ${links.length} links` +
                    ` (${body.crossed} between switches)`;
                if (lost.length) line += `; not on the fabric: ${lost.join(', ')}`;
                return [{nodes: nodes, links: links}, line];
            },

            // A click on a link or a node (not a host group: that expands) opens the detail
            // panel on it; a host bundle opens its leaf's; the close button closes it.
            select: function (node, edge, _close) {
                const nu = window.dash_clientside.no_update;
                const trigger = (window.dash_clientside.callback_context.triggered[0] || {}).prop_id || '';
                // The graph's box changes size with the panel: let cytoscape know.
                setTimeout(() => { const cy = cyOf('fabric-graph'); if (cy) cy.resize(); }, 50);
                if (trigger.startsWith(IDS.close)) return null;
                if (trigger.endsWith('tapEdgeData') && edge) {
                    const links = edge.links || [];
                    if (links.length === 1) return {kind: 'link', id: links[0], label: edge.ends};
                    return {kind: 'node', id: edge.source, label: edge.ends};
                }
                if (trigger.endsWith('tapNodeData') && node && node.kind !== 'group') {
                    return {kind: 'node', id: node.id, label: node.label};
                }
                return nu;
            },

            // The graph's elements (with positions) of the topology, with these leaves'
            // hosts shown: built once per topology and expansion by the dashboard's server
            // for every viewer, revalidated by the browser's cache (ETag), and added painted
            // from the newest state under the filter, scale and job shown. Nothing is sent
            // to the graph when it shows that already.
            draw: async function (etag, expanded, config, filter, scale, job) {
                const nu = window.dash_clientside.no_update;
                let cy = cyOf(config.graph);
                const exp = [...(expanded || [])].sort().join(',');
                const shown = (e) => cy && cy.elements().length > 0 && drawn !== null &&
                    drawn.exp === exp && (e === null || e === drawn.etag);
                if (shown(etag)) return [nu, nu, nu];
                const url = config.graph_path + (exp ? '?expanded=' + encodeURIComponent(exp) : '');
                let response, body;
                try {
                    response = await ask(url);
                    body = await response.json();
                } catch (err) {
                    return [nu, nu, 'fabric graph unreachable: ' + err];
                }
                if (!response.ok) {
                    return [nu, nu, `GET ${config.graph_path}: HTTP ${response.status}: ${body.detail}`];
                }
                mark('fabric-graph');
                cy = cyOf(config.graph);  // the page may have been left meanwhile
                for (let i = 0; !cy && i < 100; i++) {  // the graph component still mounting
                    await new Promise((done) => setTimeout(done, 50));
                    cy = cyOf(config.graph);
                }
                if (!cy) return [nu, nu, 'the fabric graph did not appear'];
                // Drawn meanwhile by an earlier run, whose result Dash drops when this run
                // overtook it: this run's result says so, or nothing would follow the draw
                // (the painter waits for it).
                const result = [{etag: body.etag, expanded: exp, elements: body.elements.length},
                                body.folded, ''];
                if (shown(body.etag)) return result;
                // Already in the newest state's colours if one is held (`prepaint`).
                const look = heldState === null ? null
                    : {state: heldState, filter: filter, scale: scale, job: job, config: config};
                if (look !== null) prepaint(body.elements, look);
                // Straight into cytoscape (one batch), not through a Dash property: the
                // renderer would copy and diff every element first.
                cy.batch(() => {
                    cy.elements().remove();
                    cy.add(body.elements);
                });
                cy.fit(undefined, 24);
                drawn = {etag: body.etag, exp: exp};
                painted = look === null ? null : paintKey(look);
                if (painted !== null && cy.edges().length) mark('fabric-painted');
                return result;
            },

            // Colour every edge and group from the state; dim what the filter leaves out; with
            // a job (its HCA GUIDs and link ids), mark its nodes and links and dim the rest.
            // Nothing to do if `draw` already drew the graph in these colours.
            paint: function (state, _elements, filter, scale, job, config) {
                const cy = cyOf(config.graph);
                if (!state || !cy) return window.dash_clientside.no_update;
                const key = paintKey({state, filter, scale, job});
                if (painted === null || !sameKey(painted, key)) {
                    const look = painter(state, filter, scale, job, config);
                    cy.batch(() => {
                        const groups = new Map();
                        cy.edges().forEach((e) => {
                            const k = look.edge(e.data('links'), e.hasClass('bundle'),
                                                e.hasClass('fast'), e.data('ends'));
                            e.data({colour: k.colour, width: k.width, title: k.title});
                            e.classes(k.classes);
                            if (e.target().hasClass('group')) groups.set(e.target().id(), k);
                        });
                        cy.nodes().forEach((v) => v.toggleClass('job', look.ofJob(v.id())));
                        groups.forEach((k, id) => {
                            const node = cy.getElementById(id);
                            const g = look.group(node.data('label'), k);
                            node.data({colour: g.colour, title: g.title});
                            node.toggleClass('error', g.error);
                            node.toggleClass('congested', g.congested);
                        });
                    });
                    painted = key;
                }
                if (cy.edges().length) mark('fabric-painted');
                if (fetchedAt !== null) {
                    const ticks = window.stacklensFabricTicks;
                    ticks.push({fetch_to_painted_ms: performance.now() - fetchedAt,
                                edges: cy.edges().length});
                    if (ticks.length > 50) ticks.shift();
                    fetchedAt = null;
                }
                const span = state.from_ns === null ? ''
                    : `replay of ${utc(state.from_ns / 1e9)} – ${utc(state.to_ns / 1e9)} UTC · `;
                return span + summaryLine(state.summary);
            },

            // Search: a node by name or GUID (exact first, then the first containing it); a
            // host folded into its leaf's group expands the group first. Else a job: its
            // ranks' hosts (GET /api/jobs/<job>/ranks), the first one in the fabric focused.
            search: async function (query, _drawn, expanded) {
                const nu = window.dash_clientside.no_update;
                const q = (query || '').trim().toLowerCase();
                const cy = cyOf('fabric-graph');
                if (!q || !cy) return [nu, nu, ''];
                const nodes = cy.nodes().map((n) => ({data: n.data()}));
                const find = (name, partial) => {
                    const exact = nodes.find((el) => el.data.kind !== 'group' &&
                        (el.data.label.toLowerCase() === name || el.data.id === name));
                    if (exact) return [nu, exact.data.id];
                    for (const el of nodes) {
                        if (el.data.kind !== 'group' || !el.data.members) continue;
                        const hit = el.data.members[name] || (partial ? Object.entries(
                            el.data.members).find(([n, guid]) => n.includes(name) || guid === name)?.[1]
                            : undefined);
                        if (hit) return [(expanded || []).concat([el.data.leaf]), hit];
                    }
                    const part = partial && nodes.find(
                        (el) => el.data.kind !== 'group' && el.data.search.includes(name));
                    return part ? [nu, part.data.id] : null;
                };
                const node = find(q, true);
                if (node) return [...node, ''];
                let response;
                try {
                    response = await fetch('/api/jobs/' + encodeURIComponent(query.trim()) + '/ranks');
                } catch (err) {
                    return [nu, nu, `nothing called "${query}" in the fabric`];
                }
                if (!response.ok) return [nu, nu, `nothing called "${query}" in the fabric, and no such job`];
                const hosts = [...new Set((await response.json()).ranks.map((r) => r.host.toLowerCase()))];
                for (const host of hosts) {
                    const hit = find(host, false);
                    if (hit) return [...hit, `job ${query.trim()}: ${hosts.length} host(s), showing ${host}`];
                }
                return [nu, nu, `job ${query.trim()}: none of its hosts (${hosts.join(', ')}) is in the fabric`];
            },

            // Centre on the focused node (or link) once it is drawn, and mark it; again a little
            // later (the graph component may still fit the view after a redraw).
            focus: function (focusId, _elements, config) {
                const cy = cyOf(config.graph);
                if (!cy || !focusId) return window.dash_clientside.no_update;
                const node = cy.getElementById(focusId);
                if (node.empty()) return window.dash_clientside.no_update;
                focused = focusId;
                const centre = () => {
                    // a later search took over, or the page was left (the graph destroyed)
                    if (focused !== focusId || cy.destroyed()) return;
                    cy.elements('.focus').removeClass('focus');
                    node.addClass('focus');
                    cy.zoom(1.5);
                    cy.center(node);
                };
                centre();
                setTimeout(centre, 300);
                return focusId;
            },

            // A click on a group (or its leaf) expands it; on an expanded leaf folds it back.
            toggle: function (node, expanded, foldable) {
                const nu = window.dash_clientside.no_update;
                if (!node || !foldable) return nu;
                const leaf = node.kind === 'group' ? node.leaf : node.id;
                const now = expanded || [];
                if (node.kind === 'group') return now.concat([leaf]);
                if (now.includes(leaf)) return now.filter((x) => x !== leaf);
                return nu;
            },
        },
    });
})();
