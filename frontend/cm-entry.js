// CodeMirror 6 entry point. Bundled by scripts/vendor_static.sh into
// static/vendor/codemirror/codemirror-python.min.js as the global `CM`.
//
// mountAll(root) turns every <textarea data-code-editor> inside `root` (and `root`
// itself when it matches) into a CodeMirror editor. The textarea stays in the DOM,
// hidden, and always holds the current code, so plain form posts and hx-post send it.
//
// Optional attributes on the textarea:
//   aria-label / <label for=…> / aria-labelledby  accessible name of the editor
//   readonly or disabled                          read-only editor
//   data-draft-key="…"                            keep a draft in localStorage under that key

import { basicSetup } from "codemirror";
import { EditorView, keymap } from "@codemirror/view";
import { EditorState } from "@codemirror/state";
import { indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";

const SELECTOR = "textarea[data-code-editor]";
const DRAFT_DELAY_MS = 300;

// CodeMirror writes its theme into a <style> element, which the page's Content-Security-Policy
// (practice/security.py) allows only with this response's nonce. The nonce rides on this
// script's own tag (templates/base.html); `.nonce` is readable only while the bundle first runs.
const CSP_NONCE =
  (typeof document !== "undefined" && document.currentScript && document.currentScript.nonce) ||
  "";

// textarea -> { view, flush }. A WeakMap, not a DOM attribute, so a DOM snapshot
// (htmx history restore) of a mounted textarea is mounted again.
const mounted = new WeakMap();
const liveEditorDoms = new WeakSet();
const pendingFlushes = new Set();

function storageGet(key) {
  try {
    return window.localStorage.getItem(key);
  } catch (_e) {
    return null; // storage disabled (privacy mode, sandboxed iframe)
  }
}

function storageSet(key, value) {
  try {
    window.localStorage.setItem(key, value);
  } catch (_e) {
    // quota exceeded or storage disabled: drafts are best effort
  }
}

function accessibleAttrs(textarea) {
  const attrs = {};
  const labelledBy = textarea.getAttribute("aria-labelledby");
  const ariaLabel = textarea.getAttribute("aria-label");
  if (labelledBy) {
    attrs["aria-labelledby"] = labelledBy;
  } else if (ariaLabel) {
    attrs["aria-label"] = ariaLabel;
  } else {
    const label = textarea.labels && textarea.labels[0];
    const text = label ? label.textContent.replace(/\s+/g, " ").trim() : "";
    attrs["aria-label"] = text || "Code editor";
  }
  const describedBy = textarea.getAttribute("aria-describedby");
  if (describedBy) attrs["aria-describedby"] = describedBy;
  if (textarea.required) attrs["aria-required"] = "true";
  return attrs;
}

function mountOne(textarea) {
  if (mounted.has(textarea)) return mounted.get(textarea).view;

  // A stale editor DOM copied by a history snapshot: drop it and mount afresh.
  const next = textarea.nextElementSibling;
  if (next && next.classList.contains("cm-editor") && !liveEditorDoms.has(next)) {
    next.remove();
  }

  const readOnly = textarea.readOnly || textarea.disabled;
  const initial = textarea.value;
  let doc = initial;
  const draftKeyAtMount = textarea.getAttribute("data-draft-key");
  if (draftKeyAtMount && !readOnly) {
    const saved = storageGet(draftKeyAtMount);
    if (saved !== null && saved !== initial) {
      doc = saved;
      textarea.value = saved;
      textarea.setAttribute("data-draft-restored", "");
      textarea.dispatchEvent(
        new CustomEvent("cm:draft-restored", { bubbles: true, detail: { key: draftKeyAtMount } })
      );
    }
  }

  let timer = null;
  const flush = () => {
    if (timer === null) return;
    clearTimeout(timer);
    timer = null;
    pendingFlushes.delete(flush);
    // Read the key now, so a data-draft-key added after mounting still works.
    const key = textarea.getAttribute("data-draft-key");
    if (key) storageSet(key, textarea.value);
  };
  const scheduleDraft = () => {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(flush, DRAFT_DELAY_MS);
    pendingFlushes.add(flush);
  };

  const extensions = [
    basicSetup,
    keymap.of([indentWithTab]), // Esc then Tab still moves focus out of the editor
    python(),
    EditorView.contentAttributes.of(accessibleAttrs(textarea)),
    EditorView.updateListener.of((update) => {
      if (!update.docChanged) return;
      textarea.value = update.state.doc.toString();
      // Let htmx triggers ("input changed") and other listeners see the edit.
      textarea.dispatchEvent(new Event("input", { bubbles: true }));
      scheduleDraft();
    }),
  ];
  if (CSP_NONCE) extensions.push(EditorView.cspNonce.of(CSP_NONCE));
  if (readOnly) {
    extensions.push(
      EditorState.readOnly.of(true),
      EditorView.contentAttributes.of({ "aria-readonly": "true" })
    );
  }

  const view = new EditorView({
    state: EditorState.create({ doc, extensions }),
  });
  liveEditorDoms.add(view.dom);

  // The hidden textarea must not block submission through browser validation
  // ("An invalid form control is not focusable"); aria-required stays on the editor.
  if (textarea.required) {
    textarea.required = false;
    textarea.setAttribute("data-cm-required", "");
  }
  textarea.hidden = true;
  textarea.after(view.dom);

  // Let <label for=…> clicks focus the editor.
  if (textarea.id) {
    for (const label of textarea.labels || []) {
      label.addEventListener("click", (event) => {
        event.preventDefault();
        view.focus();
      });
    }
  }

  // <button type="reset">: the textarea reverts to its default value; follow it.
  if (textarea.form) {
    textarea.form.addEventListener("reset", () => {
      setTimeout(() => setCode(textarea, textarea.value), 0);
    });
  }

  mounted.set(textarea, { view, flush });
  return view;
}

/** Mount editors on every textarea[data-code-editor] in root (root included). */
export function mountAll(root) {
  const scope = root || document;
  const found = [];
  if (scope.nodeType === 1 && scope.matches(SELECTOR)) found.push(scope);
  if (scope.querySelectorAll) found.push(...scope.querySelectorAll(SELECTOR));
  return found.map(mountOne);
}

/** The EditorView mounted on a textarea, or null. */
export function getView(textarea) {
  const entry = mounted.get(textarea);
  return entry ? entry.view : null;
}

/** Replace the code of a mounted textarea (or a plain one) and sync both sides. */
export function setCode(textarea, code) {
  const view = getView(textarea);
  if (!view) {
    textarea.value = code;
    return;
  }
  const current = view.state.doc.toString();
  if (current !== code) {
    view.dispatch({ changes: { from: 0, to: current.length, insert: code } });
  }
}

/** Forget a stored draft, e.g. after the server has accepted the submission. */
export function clearDraft(key) {
  try {
    window.localStorage.removeItem(key);
  } catch (_e) {
    // ignore
  }
}

/** Write pending drafts now instead of waiting for the debounce. */
export function flushDrafts() {
  for (const flush of [...pendingFlushes]) flush();
}

if (typeof window !== "undefined") {
  window.addEventListener("pagehide", flushDrafts);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "hidden") flushDrafts();
  });
}
