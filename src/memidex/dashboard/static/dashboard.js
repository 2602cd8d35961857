// memidex dashboard: progressive enhancement only. Every page works without this file;
// it adds a row filter to long tables, submits a product switch on change, disables a
// form's button while its action runs (no double writes), and "/" focuses the search
// box. It never builds HTML from text: rows are shown or hidden, labels set as text.
"use strict";

(function () {
  function filters() {
    document.querySelectorAll("input[data-filter]").forEach(function (box) {
      var table = document.getElementById(box.getAttribute("data-filter"));
      if (!table) { return; }
      box.hidden = false;
      box.addEventListener("input", function () {
        var needle = box.value.trim().toLowerCase();
        table.querySelectorAll("tbody tr").forEach(function (row) {
          row.hidden = needle !== "" && row.textContent.toLowerCase().indexOf(needle) < 0;
        });
      });
    });
  }

  function autosubmit() {
    document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
      select.addEventListener("change", function () {
        if (select.form) { select.form.submit(); }
      });
    });
  }

  function busy() {
    document.querySelectorAll("form.action").forEach(function (form) {
      form.addEventListener("submit", function () {
        form.querySelectorAll("button[type=submit]").forEach(function (button) {
          var label = button.getAttribute("data-busy");
          if (label) { button.textContent = label; }
          // disabled after this event: the browser has already taken the form's fields
          window.setTimeout(function () { button.disabled = true; }, 0);
        });
      });
    });
  }

  function hotkeys() {
    document.addEventListener("keydown", function (event) {
      if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) { return; }
      var active = document.activeElement;
      if (active && (active.tagName === "INPUT" || active.tagName === "TEXTAREA" ||
                     active.tagName === "SELECT" || active.isContentEditable)) { return; }
      var box = document.querySelector("input[data-hotkey='/']");
      if (box) { event.preventDefault(); box.focus(); }
    });
  }

  function start() {
    filters();
    autosubmit();
    busy();
    hotkeys();
    document.documentElement.setAttribute("data-enhanced", "1");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
