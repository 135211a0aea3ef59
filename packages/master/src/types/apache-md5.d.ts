declare module 'apache-md5' {
  /** Apache's MD5 crypt: `$apr1$` (or `$1$` when `salt` starts with it); hashes `password` with `salt`, or a fresh salt. */
  export default function md5(password: string, salt?: string): string
}
