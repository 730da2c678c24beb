/* frontend/assets/stacklens.js — the app's clientside callbacks (Dash serves it from /assets/). */
window.dash_clientside = Object.assign({}, window.dash_clientside, {
  stacklens: {
    /* The refresh label, every second in the browser: when the last whole refresh was,
       or, once it is more than two refresh periods (at least 3 s) old, how far behind the
       page is (a refresh is slow or failing; the page keeps its last good view). */
    behind: function (_tick, lastGood, periodMs) {
      if (!lastGood || !lastGood.at) {
        return "loading…";
      }
      const age = Date.now() - lastGood.at;
      if (age > Math.max(2 * (periodMs || 1000), 3000)) {
        return "refreshing… " + Math.round(age / 1000) + " s behind";
      }
      return "updated " + new Date(lastGood.at).toISOString().slice(11, 19) + " UTC";
    },
  },

  /* The header's time-range control (frontend/timerange.py): the URL is the truth. */
  timerange: {
    /* Both ways in one callback (Dash allows a cycle only inside one): a chosen preset or
       applied range writes the URL (keeping the page's other parameters but the playback
       step); the URL, however it changed, sets the control: its preset (the page's default
       when the URL has none), the bounds in the pickers (UTC) and the range in words. */
    update: function (pathname, search, preset, _apply, from, to, config) {
      const nu = window.dash_clientside.no_update;
      const trigger = (window.dash_clientside.callback_context.triggered[0] || {}).prop_id || "";
      if (trigger.startsWith("tr-preset.") || trigger.startsWith("tr-apply.")) {
        const q = new URLSearchParams(window.location.search);
        for (const k of ["live", "from", "to", "at", "step"]) q.delete(k);
        if (trigger.startsWith("tr-apply.")) {
          const a = window.stacklensTime.rfc3339(from), b = window.stacklensTime.rfc3339(to);
          if (!a && !b) return [nu, nu, nu, nu, nu, nu];
          if (a) q.set("from", a);
          if (b) q.set("to", b);
        } else if (preset === "custom") {
          return [nu, nu, nu, nu, nu, "custom range (UTC): set from and to, then Apply"];
        } else if (preset !== "all") {
          q.set("live", preset);
        }
        const next = q.toString() ? "?" + q.toString() : "";
        if (next !== window.location.search) {
          return [next].concat(window.dash_clientside.timerange.shown(window.location.pathname, next, config));
        }
      }
      return [nu].concat(window.dash_clientside.timerange.shown(window.location.pathname, window.location.search, config));
    },
    /* The control's preset, its choices, the pickers' bounds and the words of a URL. */
    shown: function (path, search, config) {
      const q = new URLSearchParams(search);
      const fallback = (config.live_default || {})[path] || "all";
      const data = config.presets.map((p) =>
        Object.assign({}, p, {disabled: p.value === "all" && fallback !== "all"}));
      const label = (v) => config.presets.find((p) => p.value === v).label
        .replace("Live ", "the last ") + " up to now (UTC)";
      const live = q.get("live");
      if (live && config.presets.some((p) => p.value === live)) {
        return [live, data, null, null, label(live)];
      }
      if (q.get("from") || q.get("to")) {
        const from = window.stacklensTime.picker(q.get("from"));
        const to = window.stacklensTime.picker(q.get("to"));
        return ["custom", data, from, to, (from || "the start") + " – " + (to || "now") + " UTC"];
      }
      if (fallback !== "all") return [fallback, data, null, null, label(fallback)];
      return ["all", data, null, null, "all times (UTC)"];
    },
    /* The header's page links with the URL's time range (the range goes along). */
    carry: function (_search, linkIds) {
      const q = new URLSearchParams(window.location.search);
      const kept = new URLSearchParams();
      for (const k of ["live", "from", "to"]) if (q.get(k)) kept.set(k, q.get(k));
      const tail = kept.toString() ? "?" + kept.toString() : "";
      return linkIds.map((id) => id.path + tail);
    },
  },
});

/* Times as the time-range control shows and writes them (always UTC). */
window.stacklensTime = {
  /* A URL bound (epoch seconds or RFC 3339) as the pickers show it, "YYYY-MM-DD HH:mm:ss". */
  picker: function (text) {
    if (!text) return null;
    const ms = /^-?[0-9.]+$/.test(text) ? parseFloat(text) * 1000 : Date.parse(text);
    return isNaN(ms) ? null : new Date(ms).toISOString().slice(0, 19).replace("T", " ");
  },
  /* A picker's value (UTC, "YYYY-MM-DD HH:mm:ss") as RFC 3339 for the URL and the API. */
  rfc3339: function (value) {
    if (!value) return null;
    return String(value).trim().replace(" ", "T").slice(0, 19) + "Z";
  },
};

/* Functions the Mantine components call by name (`{"function": name}` props). */
window.dashMantineFunctions = Object.assign({}, window.dashMantineFunctions, {
  /* A playback slider's label (components.playback_slider): the step's start, epoch
     seconds, as "YYYY-MM-DD HH:MM:SS UTC"; none while no step is chosen. */
  utcSeconds: function (value) {
    if (typeof value !== "number" || !isFinite(value)) return null;
    return new Date(value * 1000).toISOString().slice(0, 19).replace("T", " ") + " UTC";
  },
});

/* Report buttons (components.report_buttons): a report is built on the click, seconds on a
   busy node, so the click asks for it here with its progress (`?progress=true`: JSON
   lines `{done, total, what}` as the server builds it, then the file in base64 or the
   error), says beside the buttons which stage it is at and for how long, then saves the
   file under the server's name and leaves a link to it; a failure says the server's
   reason. A modified click (new tab, save as) is left to the browser. */
document.addEventListener("click", function (event) {
  const link = event.target.closest ? event.target.closest(".report-buttons a.button") : null;
  if (!link || !link.getAttribute("href") || event.ctrlKey || event.metaKey || event.shiftKey) {
    return;
  }
  event.preventDefault();
  if (link.dataset.building) return;
  const box = link.parentElement;
  let line = box.querySelector(".report-progress");
  if (!line) {
    line = document.createElement("span");
    line.className = "report-progress";
    line.setAttribute("role", "status");
    box.appendChild(line);
  }
  line.classList.remove("failed");
  link.dataset.building = "1";
  const what = link.textContent.replace("⤓", "").trim();
  const began = Date.now();
  let stage = "starting";
  const say = () => {
    line.textContent = "Building the " + what + "… " + stage + " (" +
      Math.round((Date.now() - began) / 1000) + " s)";
  };
  say();
  const timer = setInterval(say, 500);
  const url = new URL(link.href, window.location.href);
  url.searchParams.set("progress", "true");
  const finish = (event) => {
    if ("error" in event) throw new Error("HTTP " + event.status + ": " + event.error);
    const bytes = Uint8Array.from(atob(event.file), (c) => c.charCodeAt(0));
    const file = URL.createObjectURL(new Blob([bytes], {type: event.media_type}));
    const save = document.createElement("a");
    save.href = file;
    save.download = event.filename;
    document.body.appendChild(save);
    save.click();
    save.remove();
    const kept = document.createElement("a");  // the finished file, to open again
    kept.href = file;
    kept.download = event.filename;
    kept.className = "report-file";
    kept.textContent = event.filename;
    line.replaceChildren(what + ": ready in " + ((Date.now() - began) / 1000).toFixed(1) +
                         " s — ", kept);
  };
  fetch(url, {credentials: "same-origin"})
    .then(async (answer) => {
      if (!answer.ok) {
        let detail = answer.statusText;
        try { detail = (await answer.json()).detail || detail; } catch (e) { /* not JSON */ }
        throw new Error("HTTP " + answer.status + ": " + detail);
      }
      const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
      let rest = "";
      for (;;) {
        const {value, done} = await reader.read();
        if (value) rest += value;
        let end;
        while ((end = rest.indexOf("\n")) >= 0) {
          const text = rest.slice(0, end).trim();
          rest = rest.slice(end + 1);
          if (!text) continue;
          const event = JSON.parse(text);
          if ("file" in event || "error" in event) {
            clearInterval(timer);
            return finish(event);
          }
          stage = event.done + "/" + event.total + " " + event.what;
          say();
        }
        if (done) throw new Error("the server ended the answer without the file");
      }
    })
    .catch((err) => {
      line.textContent = what + " failed: " + err.message;
      line.classList.add("failed");
    })
    .finally(() => {
      clearInterval(timer);
      delete link.dataset.building;
    });
}, true);
