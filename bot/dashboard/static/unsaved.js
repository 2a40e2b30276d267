// Unsaved changes: a form marked data-unsaved that was edited shows "Unsaved change" and the
// browser asks before leaving the page; submitting the form clears the mark. No inline script
// (the Content Security Policy refuses it): this file is loaded from the dashboard itself.
(function () {
  "use strict";
  var dirty = new Set();
  function mark(form) {
    if (dirty.has(form)) { return; }
    dirty.add(form);
    form.classList.add("unsaved");
    var note = document.createElement("p");
    note.className = "unsaved-note";
    note.setAttribute("role", "status");
    note.textContent = "Unsaved change";
    form.appendChild(note);
  }
  document.addEventListener("input", function (event) {
    var form = event.target && event.target.form;
    if (form && form.hasAttribute("data-unsaved")) { mark(form); }
  });
  document.addEventListener("change", function (event) {
    var form = event.target && event.target.form;
    if (form && form.hasAttribute("data-unsaved")) { mark(form); }
  });
  document.addEventListener("submit", function (event) { dirty.delete(event.target); });
  window.addEventListener("beforeunload", function (event) {
    if (dirty.size > 0) { event.preventDefault(); event.returnValue = ""; }
  });
})();
