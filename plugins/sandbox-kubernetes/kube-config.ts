import { readFileSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { parse as parseYaml } from 'yaml'

/*
 * Where the Kubernetes API is and how to authenticate, as kubectl finds it (docs/engine.md#kubernetes):
 * `KUBE_API_URL` when set, else the in-cluster service account (KUBERNETES_SERVICE_HOST/PORT and the
 * token, CA and namespace files under /var/run/secrets/kubernetes.io/serviceaccount), else the current
 * context of the kubeconfig (`KUBECONFIG`, first file, or ~/.kube/config). A bearer token from a file
 * (the service account's is rotated by the kubelet) is read again at most every minute.
 */

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount'
const TOKEN_REREAD_MS = 60_000
const MAX_CONFIG_BYTES = 1024 * 1024

export interface KubeConnection {
  /** the API server's base URL (no trailing slash) */
  server: string
  namespace: string
  /** the bearer token now (undefined: none) */
  token: () => string | undefined
  ca?: Buffer
  cert?: Buffer
  key?: Buffer
  insecureSkipTlsVerify: boolean
  /** where it came from, for messages */
  source: string
}

export interface KubeConnectionOptions {
  apiUrl?: string
  namespace?: string
  /** the KUBECONFIG value (':'-separated paths; the first readable one is used) */
  kubeconfig?: string
  /** the service account directory (tests point it elsewhere) */
  serviceAccountDir?: string
  env?: NodeJS.ProcessEnv
}

function readSmall (path: string): Buffer | undefined {
  try {
    if (statSync(path).size > MAX_CONFIG_BYTES) throw new Error(`${path} is larger than ${MAX_CONFIG_BYTES} bytes`)
    return readFileSync(path)
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return undefined
    throw err
  }
}

function tokenFromFile (path: string): () => string | undefined {
  let cached: { at: number, value: string | undefined } | undefined
  return () => {
    const now = Date.now()
    if (cached === undefined || now - cached.at > TOKEN_REREAD_MS) {
      const value = readSmall(path)?.toString('utf8').trim()
      cached = { at: now, value: value === '' ? undefined : value }
    }
    return cached.value
  }
}

interface Kubeconfig {
  'current-context'?: string
  contexts?: Array<{ name: string, context?: { cluster?: string, user?: string, namespace?: string } }>
  clusters?: Array<{ name: string, cluster?: { server?: string, 'certificate-authority'?: string, 'certificate-authority-data'?: string, 'insecure-skip-tls-verify'?: boolean } }>
  users?: Array<{ name: string, user?: { token?: string, tokenFile?: string, 'client-certificate'?: string, 'client-certificate-data'?: string, 'client-key'?: string, 'client-key-data'?: string, exec?: unknown, 'auth-provider'?: unknown } }>
}

interface FromKubeconfig { server: string, namespace?: string, token: () => string | undefined, ca?: Buffer, cert?: Buffer, key?: Buffer, insecure: boolean, path: string }

function fromKubeconfig (paths: string[]): FromKubeconfig | undefined {
  for (const path of paths) {
    const text = readSmall(path)
    if (text === undefined) continue
    let doc: Kubeconfig
    try { doc = parseYaml(text.toString('utf8')) as Kubeconfig } catch (err) { throw new Error(`kubeconfig ${path} is not YAML: ${(err as Error).message}`) }
    const where = (p: string | undefined): string | undefined => p === undefined ? undefined : (p.startsWith('/') ? p : join(path, '..', p))
    const name = doc['current-context']
    if (name === undefined || name === '') throw new Error(`kubeconfig ${path} has no current-context`)
    const ctx = doc.contexts?.find(c => c.name === name)?.context
    if (ctx === undefined) throw new Error(`kubeconfig ${path}: the current context "${name}" is not defined`)
    const cluster = doc.clusters?.find(c => c.name === ctx.cluster)?.cluster
    if (cluster?.server === undefined) throw new Error(`kubeconfig ${path}: the cluster "${String(ctx.cluster)}" of context "${name}" has no server`)
    const user = doc.users?.find(u => u.name === ctx.user)?.user ?? {}
    if (user.exec !== undefined || user['auth-provider'] !== undefined) throw new Error(`kubeconfig ${path}: the user "${String(ctx.user)}" authenticates through an exec or auth-provider plugin, which this server does not run; give it a token (e.g. a service account's) or client certificates`)
    const data = (b64: string | undefined, file: string | undefined): Buffer | undefined => b64 !== undefined ? Buffer.from(b64, 'base64') : (file === undefined ? undefined : readSmall(where(file)!))
    const tokenFile = where(user.tokenFile)
    return {
      server: cluster.server,
      namespace: ctx.namespace,
      token: user.token !== undefined ? () => user.token : tokenFile !== undefined ? tokenFromFile(tokenFile) : () => undefined,
      ca: data(cluster['certificate-authority-data'], cluster['certificate-authority']),
      cert: data(user['client-certificate-data'], user['client-certificate']),
      key: data(user['client-key-data'], user['client-key']),
      insecure: cluster['insecure-skip-tls-verify'] === true,
      path
    }
  }
  return undefined
}

/** Resolves the connection; throws a message naming the setting to fix when there is none or it is broken. */
export function resolveConnection (o: KubeConnectionOptions = {}): KubeConnection {
  const env = o.env ?? process.env
  const sa = o.serviceAccountDir ?? SERVICE_ACCOUNT_DIR
  const inCluster = readSmall(join(sa, 'token')) !== undefined
  const paths = (o.kubeconfig ?? env.KUBECONFIG ?? '').split(':').filter(p => p !== '')
  if (paths.length === 0) paths.push(join(homedir(), '.kube', 'config'))
  const saNamespace = inCluster ? readSmall(join(sa, 'namespace'))?.toString('utf8').trim() : undefined
  const explicit = o.namespace !== undefined && o.namespace !== '' ? o.namespace : undefined
  let conn: KubeConnection
  if (o.apiUrl !== undefined && o.apiUrl !== '') {
    const kc = inCluster ? undefined : fromKubeconfig(paths)
    conn = {
      server: o.apiUrl,
      namespace: explicit ?? saNamespace ?? kc?.namespace ?? 'default',
      token: inCluster ? tokenFromFile(join(sa, 'token')) : (kc?.token ?? (() => undefined)),
      ca: inCluster ? readSmall(join(sa, 'ca.crt')) : kc?.ca,
      cert: kc?.cert,
      key: kc?.key,
      insecureSkipTlsVerify: kc?.insecure ?? false,
      source: 'KUBE_API_URL'
    }
  } else if (inCluster && env.KUBERNETES_SERVICE_HOST !== undefined && env.KUBERNETES_SERVICE_HOST !== '') {
    const host = env.KUBERNETES_SERVICE_HOST.includes(':') ? `[${env.KUBERNETES_SERVICE_HOST}]` : env.KUBERNETES_SERVICE_HOST
    conn = {
      server: `https://${host}:${env.KUBERNETES_SERVICE_PORT ?? '443'}`,
      namespace: explicit ?? saNamespace ?? 'default',
      token: tokenFromFile(join(sa, 'token')),
      ca: readSmall(join(sa, 'ca.crt')),
      insecureSkipTlsVerify: false,
      source: 'the in-cluster service account'
    }
  } else {
    const kc = fromKubeconfig(paths)
    if (kc === undefined) throw new Error(`no Kubernetes API to use: set KUBE_API_URL, run the server in a cluster with a service account, or give it a kubeconfig (KUBECONFIG; looked at ${paths.join(', ')})`)
    conn = { server: kc.server, namespace: explicit ?? kc.namespace ?? 'default', token: kc.token, ca: kc.ca, cert: kc.cert, key: kc.key, insecureSkipTlsVerify: kc.insecure, source: `kubeconfig ${kc.path}` }
  }
  let url: URL
  try { url = new URL(conn.server) } catch { throw new Error(`the Kubernetes API URL "${conn.server.slice(0, 200)}" (from ${conn.source}) is not a URL`) }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`the Kubernetes API URL must be http:// or https://, got "${conn.server.slice(0, 200)}" (from ${conn.source})`)
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(conn.namespace)) throw new Error(`KUBE_NAMESPACE must be a Kubernetes namespace name (a-z, 0-9, -; at most 63), got "${conn.namespace.slice(0, 100)}"`)
  return { ...conn, server: conn.server.replace(/\/+$/, '') }
}
