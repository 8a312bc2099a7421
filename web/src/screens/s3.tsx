// S3 credentials: an API key's prefix is the access key id and the whole key is the secret
// (README, "S3"); the page shows the endpoint and how to use them with the aws CLI.
import { useEffect, useState } from 'preact/hooks';
import { api, storedKey } from '../api';
import type { ScreenProps } from '../route';
import { CopyButton, ErrorNote, Section, useAction } from '../ui';

interface ConsoleConfig {
  s3Endpoint: string | null;
  s3Region: string;
}

export function S3Screen(_props: ScreenProps) {
  const [config, setConfig] = useState<ConsoleConfig | null>(null);
  const [run, error] = useAction();
  useEffect(() => void run(async () => setConfig(await api<ConsoleConfig>('GET', '/console/config.json'))), []);
  const key = storedKey() ?? '';
  // An API key is `stp_` and 32 characters; its first 12 are its prefix.
  const accessKeyId = key.slice(0, 12);
  const endpoint = config?.s3Endpoint ?? '(not listening)';
  const example = [
    `export AWS_ACCESS_KEY_ID=${accessKeyId}`,
    'export AWS_SECRET_ACCESS_KEY=<this API key>',
    `export AWS_DEFAULT_REGION=${config?.s3Region ?? 'us-east-1'}`,
    `aws --endpoint-url ${endpoint} s3 mb s3://my-bucket`,
    `aws --endpoint-url ${endpoint} s3 cp photo.jpg s3://my-bucket/photos/`,
  ].join('\n');
  return (
    <>
      <ErrorNote error={error} />
      <Section title="Credentials">
        <dl>
          <dt>Endpoint</dt>
          <dd>
            <code data-testid="s3-endpoint">{endpoint}</code>
          </dd>
          <dt>Access key id (the key's prefix)</dt>
          <dd>
            <code data-testid="s3-access-key-id">{accessKeyId}</code> <CopyButton text={accessKeyId} />
          </dd>
          <dt>Secret access key</dt>
          <dd>The whole API key you signed in with (or any other of your keys, with its own prefix as the id).</dd>
          <dt>Region</dt>
          <dd>
            <code>{config?.s3Region}</code> (any region is accepted)
          </dd>
        </dl>
      </Section>
      <Section title="With the aws CLI">
        <pre>
          <code>{example}</code>
        </pre>
        <CopyButton text={example} label="Copy commands" />
        <p>
          Buckets are top-level folders: an object uploaded by S3 shows under Files, and a folder's snapshot is its bucket as one directory.
        </p>
      </Section>
    </>
  );
}
