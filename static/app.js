/* Roofline page behaviour. Plain ES2020, no build step.
 *
 * Load after the vendored libraries, all with `defer`:
 *   katex.min.js, chart.umd.min.js, codemirror-python.min.js, htmx.min.js, app.js
 *
 * initAll(root) runs on DOMContentLoaded and on every htmx swap (htmx.onLoad).
 * Every step is idempotent, so running it twice on the same nodes is harmless.
 */
(() => {
  "use strict";

  const MATH_SELECTOR = ".math.inline, .math.block";

  // root itself is included when it matches: htmx.onLoad hands over the swapped
  // element, and querySelectorAll never returns the element it is called on.
  function select(root, selector) {
    const found = [];
    if (root.nodeType === 1 && root.matches(selector)) found.push(root);
    if (root.querySelectorAll) found.push(...root.querySelectorAll(selector));
    return found;
  }

  function renderMath(root) {
    if (typeof katex === "undefined") return;
    for (const el of select(root, MATH_SELECTOR)) {
      if (el.hasAttribute("data-katex")) continue;
      // dollarmath: $…$ -> span.math.inline; $$…$$ inside a paragraph -> div.math.inline;
      // a $$ block -> div.math.block, maybe with an <a class="mathlabel"> anchor first.
      const label = el.querySelector(":scope > .mathlabel");
      if (label) label.remove();
      const tex = el.textContent.trim();
      const displayMode = el.classList.contains("block") || el.tagName === "DIV";
      el.setAttribute("data-tex", tex);
      katex.render(tex, el, { displayMode, throwOnError: false });
      if (label) el.prepend(label);
      el.setAttribute("data-katex", "");
    }
  }

  function mountEditors(root) {
    if (typeof CM === "undefined") return;
    CM.mountAll(root);
  }

  function initAll(root) {
    const scope = root || document;
    // One failing step must not stop the others.
    for (const step of [renderMath, mountEditors]) {
      try {
        step(scope);
      } catch (err) {
        console.error(err);
      }
    }
  }

  window.roofline = { initAll };

  if (typeof htmx !== "undefined") htmx.onLoad(initAll);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", () => initAll(document));
  } else {
    initAll(document);
  }
})();
