'use strict'
// admin.js '{"broker", "prefix", "group", "base"}' runs kafkajs's admin
// API over two topics of its own (<prefix>-a, <prefix>-b) and prints what
// each call answered; the Go test checks the values. "base" is the
// timestamp (ms) of the first record it produces.
//
// admin.js '{"broker", "prefix", "acls": true}' creates, describes and
// deletes ACLs instead (the broker needs its authorizer on).
const { AclResourceTypes, AclOperationTypes, AclPermissionTypes, ResourcePatternTypes, ConfigResourceTypes } = require('kafkajs')
const { kafka, main } = require('./common')

// caught runs fn and returns the error kafkajs threw, by name and type.
async function caught(fn) {
  try {
    await fn()
    return null
  } catch (e) {
    const out = { name: e.name, type: e.type || null, message: e.message }
    // KafkaJSAggregateError (createTopics) and KafkaJSDeleteGroupsError
    // carry one error per topic or group.
    if (e.errors) out.errors = e.errors.map((x) => x.type || x.name)
    if (e.cause && e.cause.partitions) out.errors = e.cause.partitions.map((p) => p.error.type || p.error.name)
    if (e.groups) out.groups = e.groups.map((g) => ({ groupId: g.groupId, errorCode: g.errorCode, type: g.error ? g.error.type : null }))
    return out
  }
}

const offsets = (list) => list.map((p) => ({ partition: p.partition, offset: Number(p.offset), high: Number(p.high), low: Number(p.low) }))
  .sort((x, y) => x.partition - y.partition)

async function acls(admin, a) {
  const out = {}
  const topic = a.prefix + '-acl'
  const binding = (principal, op) => ({
    resourceType: AclResourceTypes.TOPIC,
    resourceName: topic,
    resourcePatternType: ResourcePatternTypes.LITERAL,
    principal,
    host: '*',
    operation: op,
    permissionType: AclPermissionTypes.ALLOW,
  })
  out.created = await admin.createAcls({
    acl: [binding('User:alice', AclOperationTypes.READ), binding('User:bob', AclOperationTypes.WRITE)],
  })
  const filter = {
    resourceType: AclResourceTypes.TOPIC,
    resourceName: topic,
    resourcePatternType: ResourcePatternTypes.LITERAL,
    operation: AclOperationTypes.ANY,
    permissionType: AclPermissionTypes.ANY,
  }
  out.described = await admin.describeAcls(filter)
  out.deleted = await admin.deleteAcls({ filters: [{ ...filter, principal: 'User:alice' }] })
  out.after = await admin.describeAcls(filter)
  return out
}

main(async (a) => {
  const client = kafka(a, 'kafkajs-admin')
  const admin = client.admin()
  await admin.connect()
  try {
    if (a.acls) return await acls(admin, a)
    const out = {}
    const ta = a.prefix + '-a'
    const tb = a.prefix + '-b'

    out.created = await admin.createTopics({
      waitForLeaders: true,
      topics: [
        { topic: ta, numPartitions: 3, configEntries: [{ name: 'retention.ms', value: '3600000' }] },
        { topic: tb, numPartitions: 1 },
      ],
    })
    out.createdAgain = await admin.createTopics({ topics: [{ topic: tb, numPartitions: 1 }] })
    out.badName = await caught(() => admin.createTopics({ topics: [{ topic: 'bad name!', numPartitions: 1 }] }))
    out.listed = (await admin.listTopics()).filter((t) => t.startsWith(a.prefix)).sort()

    await admin.createPartitions({ topicPartitions: [{ topic: ta, count: 5 }] })
    const md = await admin.fetchTopicMetadata({ topics: [ta] })
    out.metadata = md.topics.map((t) => ({
      name: t.name,
      partitions: t.partitions.map((p) => ({ partitionId: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr })).sort((x, y) => x.partitionId - y.partitionId),
    }))
    out.unknownTopic = await caught(() => admin.fetchTopicMetadata({ topics: [a.prefix + '-missing'] }))

    // Ten records on partition 0 a second apart from base, three on
    // partition 1 from base+10s.
    const producer = client.producer({ allowAutoTopicCreation: false })
    await producer.connect()
    const messages = []
    for (let i = 0; i < 10; i++) messages.push({ partition: 0, value: 'p0-' + i, timestamp: String(a.base + i * 1000) })
    for (let i = 0; i < 3; i++) messages.push({ partition: 1, value: 'p1-' + i, timestamp: String(a.base + 10000 + i * 1000) })
    await producer.send({ topic: ta, acks: -1, messages })
    await producer.disconnect()

    out.offsets = offsets(await admin.fetchTopicOffsets(ta))
    out.byTimestamp = (await admin.fetchTopicOffsetsByTimestamp(ta, a.base + 4500))
      .map((p) => ({ partition: p.partition, offset: Number(p.offset) })).sort((x, y) => x.partition - y.partition)
    await admin.deleteTopicRecords({ topic: ta, partitions: [{ partition: 0, offset: '3' }] })
    out.afterDelete = offsets(await admin.fetchTopicOffsets(ta))
    // -1 deletes up to the high watermark (KIP-107); past it is refused.
    await admin.deleteTopicRecords({ topic: ta, partitions: [{ partition: 1, offset: '-1' }] })
    out.afterDeleteAll = offsets(await admin.fetchTopicOffsets(ta))
    out.deletePastEnd = await caught(() => admin.deleteTopicRecords({ topic: ta, partitions: [{ partition: 0, offset: '99' }] }))

    // Group offsets: set, fetch, reset to earliest and to latest.
    const fetchOffsets = async () => {
      const r = await admin.fetchOffsets({ groupId: a.group, topics: [ta] })
      return r[0].partitions.map((p) => ({ partition: p.partition, offset: Number(p.offset) })).sort((x, y) => x.partition - y.partition)
    }
    await admin.setOffsets({ groupId: a.group, topic: ta, partitions: [{ partition: 0, offset: '7' }, { partition: 1, offset: '1' }] })
    out.setOffsets = await fetchOffsets()
    await admin.resetOffsets({ groupId: a.group, topic: ta, earliest: true })
    out.resetEarliest = await fetchOffsets()
    await admin.resetOffsets({ groupId: a.group, topic: ta })
    out.resetLatest = await fetchOffsets()

    out.groupsListed = (await admin.listGroups()).groups.filter((g) => g.groupId === a.group)
    out.groupsDescribed = (await admin.describeGroups([a.group])).groups.map((g) => ({
      groupId: g.groupId, state: g.state, protocolType: g.protocolType, errorCode: g.errorCode, members: g.members.length,
    }))
    out.groupsDeleted = (await admin.deleteGroups([a.group])).map((g) => ({ groupId: g.groupId, errorCode: g.errorCode }))
    out.groupsAfterDelete = (await admin.listGroups()).groups.filter((g) => g.groupId === a.group)
    out.deleteMissingGroup = await caught(() => admin.deleteGroups([a.group + '-never']))

    const cluster = await admin.describeCluster()
    out.cluster = { brokers: cluster.brokers.length, brokerPort: cluster.brokers[0].port, controller: cluster.controller, clusterId: cluster.clusterId }

    const topicConfig = async (names) => {
      const r = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: ta, configNames: names }],
      })
      return r.resources.map((res) => ({
        name: res.resourceName,
        errorCode: res.errorCode,
        configs: res.configEntries.map((c) => ({ name: c.configName, value: c.configValue, isDefault: c.isDefault })).sort((x, y) => (x.configName < y.configName ? -1 : 1)),
      }))
    }
    out.configs = await topicConfig(['retention.ms', 'cleanup.policy'])
    out.altered = await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: ta, configEntries: [{ name: 'retention.ms', value: '7200000' }, { name: 'cleanup.policy', value: 'compact' }] }],
    })
    out.configsAfter = await topicConfig(['retention.ms', 'cleanup.policy'])
    out.badConfig = await caught(() => admin.alterConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: ta, configEntries: [{ name: 'retention.ms', value: 'soon' }] }],
    }))
    const brokerCfg = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.BROKER, name: String(cluster.brokers[0].nodeId), configNames: ['log.retention.ms', 'num.partitions'] }],
    })
    out.brokerConfigs = brokerCfg.resources[0].configEntries.map((c) => c.configName).sort()
    const loggers = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.BROKER_LOGGER, name: String(cluster.brokers[0].nodeId) }],
    })
    out.brokerLoggers = loggers.resources[0].configEntries.map((c) => ({ name: c.configName, value: c.configValue, source: c.configSource }))

    await admin.deleteTopics({ topics: [tb] })
    out.listedAfterDelete = (await admin.listTopics()).filter((t) => t.startsWith(a.prefix)).sort()
    return out
  } finally {
    await admin.disconnect()
  }
})
