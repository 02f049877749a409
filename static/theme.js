/* Light or dark colours. Plain ES2020, no build step.
 *
 * By default the page follows the system setting (prefers-color-scheme: Pico and app.css both
 * have a media query for it, so this works without JavaScript too). The toggle in the header
 * overrides it: the choice is stored in localStorage and written as data-theme on <html>, which
 * Pico and app.css honour over the media query.
 *
 * Loaded *without* defer in <head> so data-theme is set before the first paint: a reader who
 * picked dark never sees a white flash. The button is wired once the DOM is there.
 */
(() => {
  "use strict";

  const KEY = "roofline:theme";
  const root = document.documentElement;
  const media = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

  function stored() {
    try {
      const v = window.localStorage.getItem(KEY);
      return v === "dark" || v === "light" ? v : null;
    } catch (_e) {
      return null; // storage disabled: follow the system
    }
  }

  function store(value) {
    try {
      window.localStorage.setItem(KEY, value);
    } catch (_e) {
      // storage disabled: the choice lasts for this page only
    }
  }

  function current() {
    return stored() || (media && media.matches ? "dark" : "light");
  }

  // Chart.js draws on a canvas, so CSS cannot recolour it: give its default text and grid
  // colours the theme's muted colours (explicit colours in a chart's config still win).
  function themeCharts() {
    const Chart = window.Chart;
    if (!Chart || !Chart.defaults) return;
    const css = getComputedStyle(root);
    const text = css.getPropertyValue("--pico-muted-color").trim();
    const grid = css.getPropertyValue("--pico-muted-border-color").trim();
    if (text) Chart.defaults.color = text;
    if (grid) Chart.defaults.borderColor = grid;
    for (const chart of Object.values(Chart.instances || {})) chart.update("none");
  }

  function sync() {
    const chosen = stored();
    if (chosen) root.setAttribute("data-theme", chosen);
    else root.removeAttribute("data-theme");
    const dark = current() === "dark";
    for (const button of document.querySelectorAll("[data-theme-toggle]")) {
      button.setAttribute("aria-pressed", String(dark));
    }
    themeCharts();
  }

  function wire() {
    for (const button of document.querySelectorAll("[data-theme-toggle]")) {
      button.hidden = false; // useless without JavaScript, so the markup starts hidden
      button.addEventListener("click", () => {
        store(current() === "dark" ? "light" : "dark");
        sync();
      });
    }
    sync();
  }

  sync(); // before the first paint (only data-theme matters this early)
  if (media && media.addEventListener) media.addEventListener("change", sync);
  // Another tab toggled: follow it.
  window.addEventListener("storage", (event) => {
    if (event.key === KEY) sync();
  });
  // Deferred scripts (Chart.js, app.js drawing the charts) run before DOMContentLoaded, so
  // wire() also recolours the charts already drawn; later ones start from the new defaults.
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", wire);
  } else {
    wire();
  }
})();
