"""Page snapshots: what the model sees of a page, with ``[ref]`` handles to act on.

One script walks the visible DOM in reading order and writes a compact
outline: headings as ``#``, list items as ``-``, text as lines, and each
interactive element (links, buttons, inputs, selects, textareas, ARIA
widgets, contenteditable) inline as ``[12] button "Send"`` — its ref
stamped on the element as ``data-df-ref="12"``.  Hidden elements are skipped
(``checkVisibility``), so text a reader cannot see is not shown either.

Refs are numbers unique within a session, never reused: an element keeps its
ref across snapshots while it stays in the document, new elements get the
next numbers, and a new document starts above every ref issued before.  So
an old ref can never silently point at a different element: it is either
still the same element or it is gone (a clear "stale ref" error).  Refs a
page forged in its own markup (outside the range this session issued for the
document, or duplicated) are re-stamped.
"""

from __future__ import annotations

from dataclasses import dataclass

SNAPSHOT_JS = r"""
({start, docStart, docToken, maxChars}) => {
  let next = start;
  if (!window.__dfDocument || window.__dfDocument !== docToken) {
    window.__dfDocument = Math.random().toString(36).slice(2) + Date.now().toString(36);
    docStart = start;
  }
  const out = [];
  let line = [];
  let total = 0;
  let truncated = false;
  const seen = new Set();
  const refs = {};
  const BLOCK = new Set(["P","DIV","SECTION","ARTICLE","MAIN","HEADER","FOOTER","NAV","ASIDE","UL","OL","LI",
    "TABLE","TR","FORM","FIELDSET","H1","H2","H3","H4","H5","H6","BLOCKQUOTE","PRE","DL","DT","DD","FIGURE",
    "FIGCAPTION","BR","HR","DETAILS","DIALOG","LEGEND","CAPTION"]);
  const SKIP = new Set(["SCRIPT","STYLE","NOSCRIPT","TEMPLATE","SVG","HEAD","META","LINK"]);
  const ROLES = new Set(["button","link","checkbox","radio","tab","menuitem","menuitemcheckbox","menuitemradio",
    "option","switch","combobox","textbox","searchbox","slider","spinbutton","treeitem"]);
  const clip = (s, n) => { s = (s || "").replace(/\s+/g, " ").trim(); return s.length > n ? s.slice(0, n - 1) + "…" : s; };
  const push = (s) => {
    if (truncated) return;
    if (total + s.length > maxChars) { truncated = true; return; }
    out.push(s); total += s.length + 1;
  };
  const flush = () => { const t = line.join(" ").replace(/\s+/g, " ").trim(); line = []; if (t) push(t); };
  const hidden = (el) => el.checkVisibility
    ? !el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})
    : getComputedStyle(el).display === "none";
  const roleOf = (el) => {
    const tag = el.tagName;
    const aria = (el.getAttribute("role") || "").toLowerCase();
    if (ROLES.has(aria)) return aria;
    if (tag === "A" && el.hasAttribute("href")) return "link";
    if (tag === "BUTTON" || tag === "SUMMARY") return "button";
    if (tag === "SELECT") return "combobox";
    if (tag === "TEXTAREA") return "textbox";
    if (tag === "INPUT") {
      const t = (el.getAttribute("type") || "text").toLowerCase();
      if (t === "hidden") return null;
      if (["submit","button","reset","image"].includes(t)) return "button";
      if (["checkbox","radio","range","color","date","datetime-local","month","time","week","file"].includes(t)) return t;
      return "textbox";
    }
    if (el.isContentEditable && el.hasAttribute("contenteditable")) return "textbox";
    return null;
  };
  const nameOf = (el, role) => {
    const aria = el.getAttribute("aria-label");
    if (aria) return aria;
    const by = el.getAttribute("aria-labelledby");
    if (by) { const t = by.split(/\s+/).map(id => document.getElementById(id)?.innerText || "").join(" "); if (t.trim()) return t; }
    if (el.labels && el.labels.length) return el.labels[0].innerText;
    if (el.tagName === "INPUT" && ["submit","button","reset"].includes((el.type || "").toLowerCase())) return el.value;
    if (role === "textbox" || role === "combobox" && el.tagName !== "SELECT") return el.placeholder || el.title || el.name || "";
    const text = el.tagName === "SELECT" ? "" : el.innerText;
    if (text && text.trim()) return text;
    return el.title || el.alt || el.querySelector?.("img[alt]")?.alt || el.name || el.placeholder || "";
  };
  const stamp = (el) => {
    const own = Number(el.getAttribute("data-df-ref"));
    if (Number.isInteger(own) && own >= docStart && own < start && !seen.has(own)) { seen.add(own); return own; }
    const ref = next++;
    el.setAttribute("data-df-ref", String(ref));
    seen.add(ref);
    return ref;
  };
  const describe = (el, role) => {
    const ref = stamp(el);
    const name = clip(nameOf(el, role), 80);
    let s = `[${ref}] ${role}` + (name ? ` "${name}"` : "");
    if (role === "link") s += ` -> ${clip(el.getAttribute("href"), 100)}`;
    if (role === "textbox" && el.value) s += ` value="${el.type === "password" ? "••••" : clip(el.value, 80)}"`;
    if (role === "checkbox" || role === "radio" || role === "switch") s += el.checked || el.getAttribute("aria-checked") === "true" ? " (checked)" : " (unchecked)";
    if (el.tagName === "SELECT") {
      const opts = Array.from(el.options).slice(0, 12).map(o => clip(o.text, 30));
      s += ` selected="${clip(el.options[el.selectedIndex]?.text, 40)}" options: ${opts.join(" | ")}`;
    }
    if (el.disabled || el.getAttribute("aria-disabled") === "true") s += " (disabled)";
    refs[ref] = `${role}${name ? ` "${name}"` : ""}`;
    return s;
  };
  const walk = (node) => {
    if (truncated) return;
    if (node.nodeType === Node.TEXT_NODE) { const t = node.textContent.replace(/\s+/g, " ").trim(); if (t) line.push(t); return; }
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    const el = node;
    if (SKIP.has(el.tagName.toUpperCase()) || hidden(el)) return;
    const role = roleOf(el);
    if (role) { line.push(describe(el, role)); return; }
    const block = BLOCK.has(el.tagName);
    if (block) flush();
    if (/^H[1-6]$/.test(el.tagName)) line.push("#".repeat(Number(el.tagName[1])));
    if (el.tagName === "LI") line.push("-");
    if (el.tagName === "IMG" && el.alt) line.push(`[image: ${clip(el.alt, 80)}]`);
    for (const child of el.childNodes) walk(child);
    if (el.shadowRoot) for (const child of el.shadowRoot.childNodes) walk(child);
    if (block) flush();
  };
  if (document.body) walk(document.body);
  flush();
  return {text: out.join("\n"), next, truncated, refs, title: document.title, url: location.href,
          document: window.__dfDocument, docStart};
}
"""

@dataclass(frozen=True)
class PageSnapshot:
    """One snapshot of the session's page.

    Attributes:
        url: The page URL.
        title: The document title.
        text: The outline (see the module docstring), untrusted page text.
        refs: Ref → short description (``button "Send"``) of the elements shown.
        truncated: The outline was cut at the size limit.
    """

    url: str
    title: str
    text: str
    refs: dict[int, str]
    truncated: bool = False

    def render(self) -> str:
        """The outline with a one-line reading guide (the provenance header is added by the tool)."""
        guide = ("Interactive elements are shown as [ref] role \"name\"; act on them with browser_click / "
                 "browser_type and the ref number.")
        tail = "\n[snapshot cut: the page continues; use browser_get_text for the full text]" if self.truncated else ""
        return f"Title: {self.title or '(untitled)'}\n{guide}\n\n{self.text or '(the page shows no text)'}{tail}"
