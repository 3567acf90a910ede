// A download button whose file travels with the page: the server sends the bytes (base64) with
// the button, and a click saves them from the browser's memory. No click asks the server for
// anything, so a click on a button that a rerun is about to replace still gets that button's
// file (a stored file of Streamlit's own download button can be gone by then: see
// lnviz/ui/downloads.py). fromBase64 is the live panels' (live/common.js, loaded before this).

function save(root, { name, mime, b64 }) {
  const url = URL.createObjectURL(new Blob([fromBase64(b64, Uint8Array)], { type: mime }));
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.hidden = true;
  root.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000); // the browser has read it long before
}

export default function ({ parentElement, data }) {
  const button = parentElement.querySelector("button.lv-download");
  const tip = parentElement.querySelector(".lv-tip");
  if (!button || !tip || !data) return;
  button.textContent = data.label;
  tip.textContent = data.help; // shown on hover and on keyboard focus, as Streamlit's help is
  button.__lvFile = data; // what a click saves: always the file this run sent
  if (!button.__lvBound) {
    button.__lvBound = true;
    button.addEventListener("click", () => save(parentElement, button.__lvFile));
  }
}
