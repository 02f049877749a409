/* Instructor review pages. Plain ES2020, no build step; loaded with `defer` after htmx.
 *
 * Review queue ([data-queue]): j / k move the selection (aria-current="true" on the row, focus
 * on its link, so a screen reader follows), Enter opens it. Keys typed into a form field, or
 * with a modifier held, are left alone. Without JavaScript every row is still a plain link.
 *
 * Attempt view ([data-listing]): a line's number opens a small comment form under that line,
 * cloned from the answer's <template data-line-form>; htmx posts it and swaps the whole answer
 * back in (with the new comment under its line). Without JavaScript the general comment form
 * has a "line" field instead.
 */
(() => {
  "use strict";

  const typing = (el) => el && el.closest && el.closest("input, textarea, select, [contenteditable]");

  // --- queue ---------------------------------------------------------------------------------
  function queueRows() {
    return [...document.querySelectorAll("[data-queue] [data-queue-row]")];
  }

  function select(rows, index, focus) {
    rows.forEach((row, i) => {
      const on = i === index;
      row.classList.toggle("selected", on);
      if (on) row.setAttribute("aria-current", "true");
      else row.removeAttribute("aria-current");
    });
    const link = rows[index].querySelector("[data-queue-link]");
    if (focus && link) link.focus();
    rows[index].scrollIntoView({ block: "nearest" });
  }

  function onQueueKey(event) {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    if (typing(event.target)) return;
    const rows = queueRows();
    if (!rows.length) return;
    let index = rows.findIndex((row) => row.getAttribute("aria-current") === "true");
    if (index < 0) index = 0;
    if (event.key === "j" || event.key === "k") {
      const next = event.key === "j" ? Math.min(index + 1, rows.length - 1) : Math.max(index - 1, 0);
      select(rows, next, true);
      event.preventDefault();
    } else if (event.key === "Enter") {
      // On a link or button Enter already does its own thing; elsewhere it opens the selection.
      if (event.target.closest && event.target.closest("a, button, summary")) return;
      const link = rows[index].querySelector("[data-queue-link]");
      if (link) {
        event.preventDefault();
        link.click();
      }
    }
  }

  function initQueue() {
    const rows = queueRows();
    if (!rows.length) return;
    document.addEventListener("keydown", onQueueKey);
    // Focus moved by Tab or a click also moves the selection, so j/k continue from there.
    rows.forEach((row, i) => row.addEventListener("focusin", () => select(queueRows(), i, false)));
  }

  // --- line comments -------------------------------------------------------------------------
  function closeLineForms(answer) {
    for (const row of answer.querySelectorAll(".line-form-row")) row.remove();
  }

  function openLineForm(button) {
    const answer = button.closest("[data-answer]");
    const template = answer && answer.querySelector("template[data-line-form]");
    const row = button.closest("tr");
    if (!template || !row) return;
    const line = button.dataset.line;
    const open = answer.querySelector(`.line-form-row[data-for-line="${line}"]`);
    closeLineForms(answer);
    if (open) return; // a second click on the same number closes its form
    const formRow = template.content.firstElementChild.cloneNode(true);
    formRow.dataset.forLine = line;
    formRow.querySelector("input[name=line]").value = line;
    formRow.querySelector("[data-line-label]").textContent = line;
    // After this line and the comments already under it.
    let after = row;
    while (after.nextElementSibling && after.nextElementSibling.classList.contains("line-comment")) {
      after = after.nextElementSibling;
    }
    after.after(formRow);
    if (typeof htmx !== "undefined") htmx.process(formRow);
    formRow.querySelector("[data-line-cancel]").addEventListener("click", () => {
      formRow.remove();
      button.focus();
    });
    formRow.querySelector("textarea").focus();
  }

  function initListings() {
    // Delegated: answers swapped in by htmx need no re-binding.
    document.addEventListener("click", (event) => {
      const button = event.target.closest && event.target.closest("[data-listing] button[data-line]");
      if (button) openLineForm(button);
    });
    document.addEventListener("keydown", (event) => {
      if (event.key !== "Escape") return;
      const formRow = event.target.closest && event.target.closest(".line-form-row");
      if (!formRow) return;
      const answer = formRow.closest("[data-answer]");
      const line = formRow.dataset.forLine;
      formRow.remove();
      const button = answer && answer.querySelector(`button[data-line="${line}"]`);
      if (button) button.focus();
    });
  }

  function init() {
    initQueue();
    initListings();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
