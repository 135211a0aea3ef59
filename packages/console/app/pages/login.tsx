import { useState } from 'preact/hooks'
import { login, type Session } from '../api.js'
import { Problem } from '../ui.js'

/** salt-api's login: user, password and eauth backend; an optional shorter session if the master allows it. */
export function LoginPage({ notice, onLogin }: { notice: string | undefined; onLogin: (session: Session) => void }) {
  const [error, setError] = useState<unknown>(undefined)
  const [busy, setBusy] = useState(false)
  const submit = async (event: Event): Promise<void> => {
    event.preventDefault()
    const form = new FormData(event.currentTarget as HTMLFormElement)
    const expire = String(form.get('token_expire') ?? '').trim()
    setBusy(true)
    setError(undefined)
    try {
      onLogin(await login(String(form.get('username')), String(form.get('password')), String(form.get('eauth')), expire === '' ? undefined : Number(expire)))
    } catch (failure) {
      setError(failure)
    } finally {
      setBusy(false)
    }
  }
  return (
    <main class="login">
      <form onSubmit={submit} aria-label="log in">
        <h1>Brine console</h1>
        {notice !== undefined && (
          <p class="notice" role="status">
            {notice}
          </p>
        )}
        <label>
          User <input name="username" autocomplete="username" required />
        </label>
        <label>
          Password <input name="password" type="password" autocomplete="current-password" required />
        </label>
        <label>
          Auth backend (eauth)
          <input name="eauth" list="eauth-backends" value="pam" required />
          <datalist id="eauth-backends">
            <option value="pam" />
            <option value="file" />
            <option value="ldap" />
            <option value="auto" />
          </datalist>
        </label>
        <details>
          <summary>Session length</summary>
          <label>
            Seconds (token_expire; only where token_expire_user_override allows it)
            <input name="token_expire" type="number" min="1" />
          </label>
        </details>
        <button type="submit" disabled={busy}>
          Log in
        </button>
        <Problem error={error} />
      </form>
    </main>
  )
}
