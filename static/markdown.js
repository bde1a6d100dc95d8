// Markdown for the chat: marked (GFM) -> raw HTML blocks escaped -> DOMPurify -> highlight.js on
// code blocks. No raw HTML from the model reaches the page: marked's html tokens are rendered as
// text, and DOMPurify strips whatever else could execute (handlers, javascript: URLs, <script>).
(function () {
  "use strict";
  const escape = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const ready = typeof window.marked !== "undefined" && typeof window.DOMPurify !== "undefined";
  if (ready) {
    window.marked.use({
      gfm: true,
      breaks: false,
      renderer: {
        html(token) { return escape(token.text || token.raw || ""); },  // model HTML shows as text
      },
    });
    window.DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A") { node.setAttribute("target", "_blank"); node.setAttribute("rel", "noopener noreferrer nofollow"); }
    });
  }
  const PURIFY = { FORBID_TAGS: ["style", "img", "form", "input", "button", "textarea", "select", "iframe", "object", "embed", "svg", "math"], FORBID_ATTR: ["style"], ALLOW_DATA_ATTR: false };

  function render(node, text) {
    if (!ready) { node.textContent = text; return; }  // vendored files missing: plain text, never HTML
    node.innerHTML = window.DOMPurify.sanitize(window.marked.parse(text || ""), PURIFY);
    if (window.hljs) {
      for (const code of node.querySelectorAll("pre code")) {
        if (code.textContent.length < 20000) window.hljs.highlightElement(code);
      }
    }
  }
  window.agentkitMarkdown = { render, escape };
})();
