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
});
