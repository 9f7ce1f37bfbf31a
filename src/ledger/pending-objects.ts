import { hashObject, type ObjectSink, type ObjectType, type ObjectWriter } from './object-store.js';

/** Objects of a commit being built: hashed now, written only once the commit is accepted. */
export class PendingObjects implements ObjectSink {
  private readonly objects = new Map<string, { type: ObjectType; content: Buffer }>();

  async write(type: ObjectType, content: Buffer): Promise<string> {
    const oid = hashObject(type, content);
    this.objects.set(oid, { type, content });
    return oid;
  }

  async flush(writer: ObjectWriter): Promise<void> {
    for (const { type, content } of this.objects.values()) await writer.write(type, content);
  }
}
