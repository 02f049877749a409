/* Mock interview clock. Plain ES2020, no build step, loaded with `defer` by the pages that show
 * a clock (catalog, mock page, exercise-page banner).
 *
 * Every [data-countdown] element holds the server's m:ss text (what a page without JavaScript
 * shows) and data-remaining-s, the seconds left when the page was rendered. We count down from
 * that number with the monotonic clock rather than comparing with an absolute deadline, so a
 * browser clock that is off by minutes still shows the right time left.
 *
 * At zero: data-on-expire="reload" reloads the page (the server then records the end and shows
 * the summary); otherwise the text becomes data-expired-text, if given. The server decides
 * what is hidden; this is only the display.
 */
(() => {
  "use strict";
  if (window.rooflineMockClock) return; // the script may be included twice on one page
  window.rooflineMockClock = true;

  const deadlines = new WeakMap(); // element -> performance.now() at which it reaches zero

  function format(seconds) {
    const s = Math.max(0, seconds);
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    const ss = String(s % 60).padStart(2, "0");
    // The server writes m:ss with minutes past 59; keep the same form so nothing jumps.
    return h ? `${h * 60 + m}:${ss}` : `${m}:${ss}`;
  }

  function tick() {
    const now = performance.now();
    for (const el of document.querySelectorAll("[data-countdown]")) {
      if (!deadlines.has(el)) {
        const left = Number(el.getAttribute("data-remaining-s"));
        if (!Number.isFinite(left)) continue;
        deadlines.set(el, now + left * 1000);
      }
      if (el.hasAttribute("data-expired")) continue;
      const left = Math.ceil((deadlines.get(el) - now) / 1000);
      if (left > 0) {
        const text = format(left);
        if (el.textContent !== text) el.textContent = text;
        continue;
      }
      el.setAttribute("data-expired", "");
      el.textContent = el.getAttribute("data-expired-text") || format(0);
      if (el.getAttribute("data-on-expire") === "reload") {
        // A moment after zero, so the server's clock has passed the deadline too.
        setTimeout(() => window.location.reload(), 1000);
      }
    }
  }

  function start() {
    tick();
    setInterval(tick, 250);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
