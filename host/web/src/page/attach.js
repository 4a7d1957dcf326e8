// Images on Latch's page: the ones attached to the next message (the Image
// control, or an image pasted or dropped into the composer), shown as chips
// with a thumbnail until sent or removed, and the ones the transcript's
// user messages hold, fetched with the token and shown as thumbnails.
//
// The server checks each attached file as `latch run --image` checks one
// (PNG, JPEG, GIF or WebP, at most 5 MiB) before anything is recorded; a
// refused file stays attached, with the server's reason in the notice.
// Loaded before app.js, whose helpers ($, el, api, current) it calls.
"use strict";

let attachments = [];   // {name, type, data (base64), url (data URL)}
const imageUrls = {};   // sha256 -> data URL of a transcript image
const imageLoads = {};  // sha256 -> the fetch of its bytes, while in flight

function readFile(file) {
  return new Promise((done, fail) => {
    const r = new FileReader();
    r.onload = () => {
      const url = String(r.result);
      const at = url.indexOf(",");
      done({ name: file.name || "pasted image", type: file.type || "", url, data: at < 0 ? "" : url.slice(at + 1) });
    };
    r.onerror = () => fail(r.error);
    r.readAsDataURL(file);
  });
}

async function attachFiles(files) {
  for (const f of files) {
    try {
      attachments.push(await readFile(f));
    } catch (e) {
      notice("Cannot read " + (f.name || "the file") + ": " + e);
    }
  }
  renderAttachments();
}

function renderAttachments() {
  const box = $("attachments");
  box.replaceChildren(...attachments.map((a, n) => {
    const chip = el("span", "chip");
    chip.title = a.name;
    if (a.type.startsWith("image/")) {
      const img = el("img", "thumb");
      img.src = a.url;
      img.alt = a.name;
      chip.appendChild(img);
    }
    chip.appendChild(el("span", "name", a.name));
    const x = el("button", "remove", "×");
    x.type = "button";
    x.setAttribute("aria-label", "Remove " + a.name);
    x.addEventListener("click", () => { attachments.splice(n, 1); renderAttachments(); });
    chip.appendChild(x);
    return chip;
  }));
}

// What a message sends of the attached images.
function attachedImages() {
  return attachments.map((a) => ({ name: a.name, data: a.data }));
}

function clearAttachments() {
  attachments = [];
  renderAttachments();
}

// A transcript image: a thumbnail filled once its bytes arrive (the API
// needs the token header, so an <img src> cannot fetch it itself).
function thumb(session, m) {
  const img = el("img", "thumb");
  img.alt = "image " + m.mime_type + (m.width ? " " + m.width + "×" + m.height : "");
  img.title = img.alt;
  img.dataset.sha = m.sha256;
  if (imageUrls[m.sha256]) {
    img.src = imageUrls[m.sha256];
    return img;
  }
  // One fetch per image, however often the transcript renders meanwhile.
  if (!imageLoads[m.sha256]) {
    imageLoads[m.sha256] = fetch("/api/sessions/" + session + "/images/" + m.sha256, { credentials: "omit", headers: authHeaders() })
      .then((r) => (r.ok ? r.blob() : Promise.reject(new Error("HTTP " + r.status))))
      .then((blob) => new Promise((done) => { const f = new FileReader(); f.onload = () => done(String(f.result)); f.readAsDataURL(blob); }))
      .then((url) => { imageUrls[m.sha256] = url; return url; })
      .finally(() => { delete imageLoads[m.sha256]; });
  }
  imageLoads[m.sha256].then((url) => { img.src = url; }).catch(() => { img.classList.add("missing"); });
  return img;
}

function setupAttach() {
  $("attach").addEventListener("change", (e) => {
    const files = [...e.target.files];
    e.target.value = "";
    attachFiles(files);
  });
  // A pasted image is attached; pasted text is pasted as usual.
  $("input").addEventListener("paste", (e) => {
    const files = [...((e.clipboardData && e.clipboardData.files) || [])].filter((f) => f.type.startsWith("image/"));
    if (!files.length) return;
    e.preventDefault();
    attachFiles(files);
  });
  const composer = $("composer");
  composer.addEventListener("dragover", (e) => {
    if (e.dataTransfer && [...e.dataTransfer.types].includes("Files")) { e.preventDefault(); composer.classList.add("dropping"); }
  });
  composer.addEventListener("dragleave", () => composer.classList.remove("dropping"));
  composer.addEventListener("drop", (e) => {
    composer.classList.remove("dropping");
    const files = [...((e.dataTransfer && e.dataTransfer.files) || [])];
    if (!files.length) return;
    e.preventDefault();
    attachFiles(files);
  });
}
