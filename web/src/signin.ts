// The sign-in of every page: a bearer token kept in the tab's session
// storage, checked by opening the page with it, and a form asking for one
// when there is none or it was refused.

import { Api, ApiError } from "./api";

export interface SignIn<S> {
  /** The session-storage key the token is kept under. */
  storageKey: string;
  /** The document title while signing in. */
  docTitle: string;
  title: string;
  intro: string;
  /** Reads the session with api; throws (an ApiError 401) if the token is refused. */
  session: (api: Api) => Promise<S>;
  /** Shows the page for the session. */
  show: (api: Api, session: S) => void;
  /** What an error other than a refused token means to the person. */
  explain: (e: unknown) => string;
}

const REFUSED = "That token is not accepted. Check it and try again.";

function el(tag: string, cls = "", text?: string): HTMLElement {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function why<S>(s: SignIn<S>, e: unknown): string {
  return e instanceof ApiError && e.status === 401 ? REFUSED : s.explain(e);
}

/** Opens the page with the stored token, or asks for one. */
export async function startSignedIn<S>(s: SignIn<S>, app: HTMLElement): Promise<void> {
  const token = sessionStorage.getItem(s.storageKey);
  if (!token) return signIn(s, app);
  const api = new Api(token);
  try {
    s.show(api, await s.session(api));
  } catch (e) {
    signIn(s, app, why(s, e));
  }
}

/** Forgets the stored token and asks for one, saying why if error is given. */
export function signIn<S>(s: SignIn<S>, app: HTMLElement, error?: string): void {
  sessionStorage.removeItem(s.storageKey);
  document.title = s.docTitle;
  const main = el("main", "signin");
  const form = el("form", "signin-card") as HTMLFormElement;
  form.setAttribute("aria-labelledby", "signin-title");
  const title = el("h1", "", s.title);
  title.id = "signin-title";
  const intro = el("p", "", s.intro);
  const label = el("label", "", "Bearer token") as HTMLLabelElement;
  label.htmlFor = "token";
  const input = el("input") as HTMLInputElement;
  input.id = "token";
  input.type = "password";
  input.autocomplete = "current-password";
  input.required = true;
  input.spellcheck = false;
  const err = el("p", "form-error");
  err.id = "signin-error";
  err.setAttribute("role", "alert");
  if (error) err.textContent = error;
  input.setAttribute("aria-describedby", "signin-error");
  const btn = el("button", "primary", "Sign in") as HTMLButtonElement;
  btn.type = "submit";
  form.append(title, intro, label, input, err, btn);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    btn.disabled = true;
    err.textContent = "";
    const api = new Api(token);
    try {
      const session = await s.session(api);
      sessionStorage.setItem(s.storageKey, token);
      s.show(api, session);
    } catch (e) {
      err.textContent = why(s, e);
      btn.disabled = false;
      input.focus();
    }
  });
  main.append(form);
  app.replaceChildren(main);
  input.focus();
}
